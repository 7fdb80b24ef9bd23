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
    /// It was interrupted by a deadlock or a serialization failure.
    pub(super) conflict: bool,
}

/// The next claim's size for a task on one worker, after a batch of `size` that ran
/// `ran` of its jobs, was cut short by `batch_time` (`cut`), or hit conflicts.
///
/// Doubled (up to `max`) while claims come back full, so a backlog is worked in large
/// transactions (one claim and one commit for many jobs); what was found when the
/// backlog runs short, so an idle host claims one job at a time and its workers share a
/// short queue (ten slow jobs go to ten workers, not one); halved when the batch ran past
/// `batch_time` or its jobs conflicted, so a transaction's locks stay short.
pub(super) fn next_size(size: usize, max: usize, ran: usize, cut: bool, conflicts: usize) -> usize {
    let next = if cut || conflicts > 0 {
        (size / 2).min(ran)
    } else if ran < size {
        ran
    } else {
        size.saturating_mul(2)
    };
    next.clamp(1, max.max(1))
}

#[cfg(test)]
mod tests {
    use super::next_size;

    #[test]
    fn a_batch_grows_with_the_backlog_and_shrinks_when_it_runs_short_long_or_into_conflicts() {
        let mut size = 1;
        let mut sizes = Vec::new();
        for _ in 0..7 {
            size = next_size(size, 32, size, false, 0);
            sizes.push(size);
        }
        assert_eq!(sizes, [2, 4, 8, 16, 32, 32, 32]);
        assert_eq!(next_size(32, 32, 5, false, 0), 5, "a short backlog");
        assert_eq!(next_size(32, 32, 0, false, 0), 1, "nothing due: one job next");
        assert_eq!(next_size(32, 32, 20, true, 0), 16, "cut short after twenty jobs");
        assert_eq!(next_size(32, 32, 3, true, 0), 3, "cut short after three jobs");
        assert_eq!(next_size(32, 32, 32, false, 1), 16, "a conflict");
        assert_eq!(next_size(1, 1, 1, false, 0), 1, "--batch 1 stays one");
    }
}
