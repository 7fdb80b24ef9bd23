//! Almanac: calendar jobs on PostgreSQL that come out right, exactly once in effect,
//! with task logic in sandboxed WebAssembly components.
//!
//! The data's path through the modules: [`catalog`] (which plugins are served),
//! [`calendar`] (cron + zone -> slots), [`scheduler`] (cursor -> jobs), [`executor`]
//! (claim -> run -> commit), [`plugin`] (the wasm runtime), [`task`] (what a task is) and
//! [`capability`] (what a plugin is lent); [`outbox`] delivers the messages jobs
//! published; [`metrics`], [`dashboard`] and [`http`] show an operator what is going
//! on. The modules form layers, checked by `host/tests/layers.rs`
//! (`docs/src/internals/architecture.md`).
pub mod access;
pub mod backoff;
pub mod bench;
pub mod bindings;
pub mod calendar;
pub mod capability;
pub mod catalog;
pub mod clients;
pub mod cluster;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod demo;
pub mod dryrun;
pub mod executor;
pub mod grants;
pub mod history;
pub mod host;
pub mod hosts;
pub mod http;
pub mod job;
pub mod login;
pub mod metrics;
pub mod migrate;
pub mod operators;
pub mod outbox;
pub mod plugin;
pub mod scheduler;
pub mod status;
pub mod task;
pub mod text;
pub mod tls;
pub mod wake;
