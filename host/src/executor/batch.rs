//! What a batch is made of: the rows its claim returns, how each job ended, how a batch
//! fails, and the statement that ends it.
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::job::JobEnd;

/// Ends a batch's transaction, and what its jobs left on the session ([`crate::login::CLEAN`]).
pub(super) static COMMIT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("COMMIT; {}", crate::login::CLEAN));

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error("{0}")]
    ConnectionLost(String),
    /// The database dropped the connection under the batch (57P01, class 08).
    #[error("{0}")]
    Dropped(String),
}

/// One claimed row.
pub(super) struct Claimed {
    pub(super) task: String,
    pub(super) slot: DateTime<Utc>,
    pub(super) key: String,
    /// Attempts before this one.
    pub(super) attempts: i32,
    pub(super) payload: Option<String>,
    pub(super) crashes: i32,
    /// As they were before the claim marked the job done.
    pub(super) last_error: Option<String>,
    pub(super) digest: Option<String>,
    pub(super) run_after: DateTime<Utc>,
    pub(super) period: String,
    /// Transient interruptions before this attempt.
    pub(super) transients: i32,
}

impl From<&tokio_postgres::Row> for Claimed {
    fn from(row: &tokio_postgres::Row) -> Self {
        Claimed {
            task: row.get(0),
            slot: row.get(1),
            key: row.get(2),
            attempts: row.get(3),
            payload: row.get(4),
            crashes: row.get(5),
            last_error: row.get(6),
            digest: row.get(7),
            run_after: row.get(8),
            period: row.get(9),
            transients: row.get(10),
        }
    }
}

/// How one job ended, and whether its connection carried a cancel request.
pub(super) struct JobRun {
    pub(super) end: JobEnd,
    pub(super) elapsed: Duration,
    pub(super) cancelled: bool,
}
