//! How a job's end is written in its own transaction, and what follows it in the same
//! message: the next job's savepoint (sent unanswered after a job that succeeded:
//! [`InFlight`]), or the batch's COMMIT. A failed job rolls
//! back to its savepoint and records its attempt (or its interruption) over the
//! claim's done mark.
use std::sync::Arc;
use std::time::Duration;

use crate::db::Conn;
use chrono::{DateTime, Utc};
use futures_util::future::try_join3;

use super::batch::{BatchError, Claimed, JobRun, COMMIT};
use crate::capability::db::END_CALL;
use crate::db::Prepared;
use crate::job::JobEnd;

/// What follows a job in the same round trip.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Follow {
    /// The next job's savepoint.
    Savepoint,
    /// The batch's end.
    Commit,
}

impl Follow {
    pub(super) fn sql(self) -> &'static str {
        match self {
            Follow::Savepoint => "SAVEPOINT job",
            Follow::Commit => &COMMIT,
        }
    }

    /// What follows a successful call that sent statements: [`END_CALL`] (a function
    /// the plugin may call can change session settings, which must not reach the next
    /// job), then the next savepoint; COMMIT resets them itself.
    pub(super) fn after_call(self) -> &'static str {
        match self {
            Follow::Savepoint => {
                static NEXT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("{END_CALL}; SAVEPOINT job"));
                &NEXT
            }
            Follow::Commit => &COMMIT,
        }
    }
}

/// What followed a job that succeeded (its session reset, the next job's savepoint),
/// sent and not yet answered: the next job's statements go out behind it in the same
/// pipeline, so a job costs no round trip of the host's own. Its answer is read while the
/// next job runs, and known before anything is done about that job's end: a ROLLBACK TO
/// after a savepoint that failed would undo the job before it.
pub(super) struct InFlight(std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send>>);

impl InFlight {
    /// Send `sql` on `conn` now (queued on the connection in order, before any later
    /// statement), without waiting for its answer.
    pub(super) async fn send(conn: &Arc<Conn>, sql: &'static str) -> InFlight {
        let conn = conn.clone();
        let mut sent = Box::pin(async move { conn.batch_execute(sql).await });
        // The first poll queues the message; it cannot have its answer yet.
        match futures_util::poll!(sent.as_mut()) {
            std::task::Poll::Ready(answer) => InFlight(Box::pin(std::future::ready(answer))),
            std::task::Poll::Pending => InFlight(sent),
        }
    }

    /// Its answer, if anything was sent.
    pub(super) async fn answer(sent: Option<InFlight>) -> Result<(), BatchError> {
        match sent {
            Some(InFlight(sent)) => Ok(sent.await?),
            None => Ok(()),
        }
    }
}

/// Rolls a failed job back to its savepoint: its writes, and settings it changed.
const ROLLBACK_JOB: &str = "ROLLBACK TO SAVEPOINT job";

/// Fail a job that its hosts kept dying on, without running it again.
pub(super) async fn poisoned(
    conn: &Arc<Conn>,
    statements: &Statements<'_>,
    plugin: &crate::plugin::Plugin,
    row: &Claimed,
    follow: Follow,
) -> Result<JobRun, BatchError> {
    let message = crate::text::clip(
        format!(
            "not run again: the host or the database server running it ended {} times before the job did (last: {})",
            row.crashes,
            row.last_error.as_deref().unwrap_or("unknown")
        ),
        crate::text::MAX_ERROR,
    );
    let failure = Failure { message: &message, give_up: true, delay: Duration::ZERO, digest: &plugin.digest, cancelled: false, transient: false };
    record_failure(conn, statements, (row.slot, &row.key), failure, follow).await?;
    tracing::error!(error = %crate::text::printable(&message), "job failed for good");
    Ok(JobRun { end: JobEnd::Failed, elapsed: Duration::ZERO, cancelled: false, conflict: false })
}

/// A failed attempt as recorded.
pub(super) struct Failure<'a> {
    pub(super) message: &'a str,
    /// Fail the job for good rather than retry it after `delay`.
    pub(super) give_up: bool,
    pub(super) delay: Duration,
    pub(super) digest: &'a str,
    /// The call sent a cancel request on this connection.
    pub(super) cancelled: bool,
    /// An interruption on the job's own budget ([`transient`]), not one of its attempts.
    pub(super) transient: bool,
}

/// Roll the job's savepoint back (its writes and the plugin's role together), record the
/// failed attempt and send `follow`, in one round trip.
pub(super) async fn record_failure(
    conn: &Arc<Conn>,
    statements: &Statements<'_>,
    (slot, key): (DateTime<Utc>, &str),
    failure: Failure<'_>,
    follow: Follow,
) -> Result<(), BatchError> {
    let Failure { message, give_up, delay, digest, cancelled, transient } = failure;
    let params: [&dyn crate::db::Param; 7] = [&slot, &key, &message, &give_up, &delay.as_secs_f64(), &digest, &statements.host];
    let record = if transient { &statements.interrupted } else { &statements.failed };
    if !cancelled {
        try_join3(conn.batch_execute(ROLLBACK_JOB), record.exec(conn, &params), conn.batch_execute(follow.sql())).await?;
        return Ok(());
    }
    // The server acts on a cancel request a moment after it was sent, so one may still
    // be on its way after the call ended, and would abort the first statement it meets
    // (a whole batch lost, its jobs counted as crashes). Rolling back to the savepoint
    // again undoes what it aborted; the batch's end waits until the failure is recorded.
    let mut tries = 0;
    loop {
        match futures_util::future::try_join(conn.batch_execute(ROLLBACK_JOB), record.exec(conn, &params)).await {
            Ok(_) => break,
            Err(e) if tries < LATE_CANCELS && e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) => tries += 1,
            Err(e) => return Err(e.into()),
        }
    }
    conn.batch_execute(follow.sql()).await?;
    Ok(())
}

/// Cancel requests a job's call may have left on their way: one per resend
/// ([`crate::capability::db`]'s cancel), a few at most.
const LATE_CANCELS: usize = 6;

/// The host's own per-job statements, prepared on this connection.
pub(super) struct Statements<'a> {
    pub(super) failed: Prepared,
    pub(super) interrupted: Prepared,
    /// This host, as the attempts it records name it.
    pub(super) host: &'a str,
}
