//! End-to-end tests: a real PostgreSQL, real plugin components, real `almanac`
//! processes killed with real signals.
mod support;

mod core;
mod dryrun;
mod application;
mod bench;
mod calendar;
mod catalogue;
mod changes;
mod faults;
mod hardening;
mod logins;
mod history;
mod operate;
mod outbox;
mod periods;
mod observe;
mod pooler;
mod python;
mod privilege;
mod reload;
mod scaffold;
mod scheduler;
mod settings;
mod tls;
mod reliability;
mod transient;
mod failover;
mod hold;
mod server_crash;
