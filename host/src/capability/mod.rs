//! What the host lends a plugin, one module per WIT interface.
pub mod db;
pub mod log;
pub mod config;
pub mod outbox;
