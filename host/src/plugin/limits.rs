//! What a host allows its plugin instances: memory, pool slots, functions, time.
use std::time::Duration;

/// Resource limits for plugin instances.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Linear memory one instance may grow to. Defaults to 64 MiB.
    pub memory_bytes: usize,
    /// Instances alive at once (pooling allocator slots). Defaults to 64.
    pub instances: u32,
    /// Instances kept warm for their plugins' next jobs ([`TaskSpec::reuse`]), across all
    /// plugins; their slots come on top of `instances`, so they never starve a fresh
    /// instance. Defaults to 8.
    pub warm: u32,
    /// Entries of the statement policy's function deny list to lift (e.g. `pg_sleep`).
    pub allow_functions: Vec<String>,
    /// Functions to take off the allowlist ([`allow::ALLOWED`](crate::capability::db::policy::allow::ALLOWED)).
    pub deny_functions: Vec<String>,
    /// The longest timeout a plugin may declare; a longer one is cut to this (with a
    /// warning), so no job holds a worker, a connection and its row locks for days.
    /// Defaults to 15 minutes.
    pub max_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            instances: 64,
            warm: 8,
            allow_functions: Vec::new(),
            deny_functions: Vec::new(),
            max_timeout: Duration::from_secs(15 * 60),
        }
    }
}
