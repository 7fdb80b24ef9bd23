//! Why loading a plugin file or calling a plugin failed.
use std::time::Duration;

/// Why a plugin file could not be loaded. Every message starts with the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{file}: cannot read: {source}")]
    Read { file: String, source: std::io::Error },
    #[error("{file}: not a WebAssembly file (it does not start with the \\0asm header)")]
    NotWasm { file: String },
    #[error("{file}: a core WebAssembly module, not a component; build plugins with `cargo build --target wasm32-wasip2`")]
    CoreModule { file: String },
    #[error("{file}: invalid component: {reason}")]
    Invalid { file: String, reason: String },
    #[error("{file}: does not fit world task-plugin of {}: {reason}", crate::bindings::WIT_VERSIONS.join(" or "))]
    World { file: String, reason: String },
    #[error("{file}: describe() failed: {reason}")]
    Describe { file: String, reason: String },
    #[error("{file}: {reason}")]
    Spec { file: String, reason: String },
    #[error("{file}: task {task:?} is already provided by {other}")]
    Duplicate { file: String, task: String, other: String },
}

/// Why one plugin call failed. Each case says whether a retry may help.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{message}")]
    Task { message: String, retryable: bool },
    /// A statement failed (with its SQLSTATE) or was refused by the host (without).
    #[error("{}{message}", sqlstate.as_ref().map(|s| format!("database error {s}: ")).unwrap_or_default())]
    Db { sqlstate: Option<String>, message: String, retryable: bool },
    #[error("{0}")]
    Trap(String),
    /// `cancelled`: a statement was still running at the deadline and the host sent the
    /// server a cancel request; the connection should not be reused, as a late cancel
    /// could land on a later statement.
    #[error("plugin exceeded its deadline of {timeout:?}")]
    Deadline { timeout: Duration, cancelled: bool },
    #[error("plugin exceeded its memory limit of {} MiB", .0 >> 20)]
    Memory(usize),
    #[error("plugin could not be instantiated: {0}")]
    Instantiate(String),
    /// The call's connection is gone or in an unknown state; the caller must drop it.
    #[error("database connection lost during the call: {0}")]
    ConnectionLost(String),
}

impl CallError {
    /// Whether trying the job again later may succeed.
    pub fn retryable(&self) -> bool {
        match self {
            CallError::Task { retryable, .. } | CallError::Db { retryable, .. } => *retryable,
            _ => true,
        }
    }
}
