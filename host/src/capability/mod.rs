//! What the host lends a plugin, one module per WIT interface.
pub mod business;
pub mod config;
pub mod db;
pub mod jobs;
pub mod log;
pub mod outbox;
