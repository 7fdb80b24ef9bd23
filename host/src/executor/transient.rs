//! Transient errors: what the database does to a job, not what the job does. A deadlock
//! (40P01) or a serialization failure (40001) between workers over the same rows, an
//! admin shutdown, a server restart or a failover (57P01, 57P02, 57P03, class 08, a lost
//! connection) would fail a healthy job for good after `max_attempts` of them. They are
//! retried with a backoff of their own, on a budget of their own (`jobs.transients`),
//! recorded in the attempt history as `transient`, and never counted as attempts; nor
//! is a server that went away under a job counted as one of its crashes (the sweep
//! tells the two apart: `sweep_claims.sql`).
use std::time::Duration;

use super::batch::BatchError;
use crate::capability::db::{conflict_sqlstate, transient_sqlstate, Ending};
use crate::plugin::CallError;

/// Interruptions a job may have before it fails, by default: at [`MAX`] apart, about
/// half an hour of a database that keeps failing it.
pub const BUDGET: i32 = 30;

/// The first retry's delay after an interruption (doubling, with jitter): short, since
/// a deadlock's other side is usually done within it.
const BASE: Duration = Duration::from_millis(200);

/// The longest delay between retries: a failover takes seconds to a minute.
const MAX: Duration = Duration::from_secs(60);

/// Records an interruption in the job's transaction ($1 slot, $2 key, $3 error, $4 give
/// up, $5 delay, $6 digest, $7 this host): `almanac_job.interrupted` (migrations V12, V31).
pub const RECORD: &str = "SELECT almanac_job.interrupted($1, $2, $3, $4, $5, $6, $7)";

/// Whether a call that failed with `error` (None: its connection was lost) was
/// interrupted rather than failed: its first database error was transient. Its
/// deadline or memory running out is its own, whatever the database said meanwhile.
pub fn of_call(ending: &Ending, error: Option<&CallError>) -> bool {
    if matches!(error, Some(CallError::Deadline { .. } | CallError::Memory(_))) {
        return false;
    }
    ending.failure.as_ref().and_then(|f| f.sqlstate.as_deref()).is_some_and(transient_sqlstate)
}

/// Whether a call was interrupted by its jobs' conflict with one another (a deadlock, a
/// serialization failure): what lowers its task's concurrency ([`super::share`]), unlike
/// a server that went away.
pub fn conflict_of_call(ending: &Ending) -> bool {
    ending.failure.as_ref().and_then(|f| f.sqlstate.as_deref()).is_some_and(conflict_sqlstate)
}

/// Whether a batch that failed as a whole was ended by a conflict (a serialization
/// failure at COMMIT, a deadlock on the host's own statements).
pub fn conflict_of_batch(error: &BatchError) -> bool {
    matches!(error, BatchError::Db(e) if e.code().is_some_and(|c| conflict_sqlstate(c.code())))
}

/// Whether a batch ended because the database dropped its connection, or cancelled one
/// of the host's own statements: a job's deadline sends cancel requests, and one may
/// land late, past the job's own statements (record.rs waits out a few), on the batch's
/// next SAVEPOINT, put-back or COMMIT. The whole batch then rolls back, nothing of the
/// plugin's doing: judged a host crash, a job that had only run out of time got a
/// crash and a second attempt (tests/e2e/reliability.rs, 1 job in 200, once in CI).
pub fn of_batch(error: &BatchError) -> bool {
    match error {
        BatchError::Dropped(_) => true,
        BatchError::Db(e) => e.is_closed() || e.code().is_some_and(|c| transient_sqlstate(c.code()) || *c == tokio_postgres::error::SqlState::QUERY_CANCELED),
        BatchError::ConnectionLost(_) => false,
    }
}

/// After `before` interruptions: whether to fail the job now (the budget is spent) and
/// when to try it again.
pub fn next(before: i32, budget: i32) -> (bool, Duration) {
    let n = before.saturating_add(1);
    (n > budget, crate::backoff::delay(BASE, MAX, u32::try_from(n).unwrap_or(u32::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_spent_after_its_last_retry() {
        assert!(!next(0, 1).0);
        assert!(next(1, 1).0);
        assert!(next(0, 0).0);
        let (_, delay) = next(20, 30);
        assert!(delay <= MAX && delay >= MAX / 2, "{delay:?}");
    }
}
