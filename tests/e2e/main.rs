//! End-to-end tests: a real PostgreSQL, real plugin components, real `almanac`
//! processes killed with real signals.
mod support;

mod application;
mod bench;
mod business;
mod calendar;
mod catalogue;
mod changes;
mod confinement;
mod core;
mod dependencies;
mod dryrun;
mod failover;
mod faults;
mod grants;
mod hardening;
mod history;
mod hold;
mod logins;
mod observe;
mod operate;
mod outage;
mod outbox;
mod periods;
mod pooler;
mod privilege;
mod python;
mod reliability;
mod reload;
mod scaffold;
mod scheduler;
mod server_crash;
mod settings;
mod tls;
mod transient;
mod upgrade;
