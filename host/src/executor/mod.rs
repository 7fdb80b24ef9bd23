//! Claim -> run -> commit. Each worker owns one connection and loops: claim up to
//! `batch` due jobs `FOR UPDATE SKIP LOCKED`, run each under its own savepoint, mark it
//! done (or record the failed attempt) in the same transaction, commit.
//!
//! A crash anywhere before COMMIT rolls back the plugin's writes and the done mark
//! together, and releases the row locks: the jobs are simply pending again.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Object, Pool};
use futures_util::future::try_join3;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bindings::almanac::plugin::types::{Job, Slot};
use crate::metrics::{JobEnd, Metrics};
use crate::plugin::{CallError, Loaded};

const CLAIM: &str = include_str!("claim.sql");
const MARK_DONE: &str = include_str!("mark_done.sql");
const MARK_FAILED: &str = include_str!("mark_failed.sql");

/// Executor settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Concurrent workers, each with its own connection. Defaults to 4.
    pub workers: usize,
    /// Jobs claimed per transaction. Defaults to 1 (one job per transaction).
    pub batch: usize,
    /// First retry delay; doubles per attempt, with jitter. Defaults to 1 s.
    pub retry_base: Duration,
    /// Longest retry delay. Defaults to 1 h.
    pub retry_max: Duration,
    /// Polling interval when idle and no notification arrives. Defaults to 1 s.
    pub poll_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 4,
            batch: 1,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// What a committed batch did.
#[derive(Debug, Default, Clone)]
pub struct BatchOutcome {
    pub claimed: usize,
    /// Each job run: its task, how it ended and the time in the plugin.
    pub jobs: Vec<(String, JobEnd, Duration)>,
    /// A cancel request was sent on this connection; replace it after the batch.
    pub retire_connection: bool,
}

/// Run `options.workers` workers until `shutdown`; in-flight batches finish first.
pub async fn run(
    pool: Pool,
    loaded: Arc<Loaded>,
    options: Options,
    metrics: Arc<Metrics>,
    wake: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    let mut workers = tokio::task::JoinSet::new();
    for id in 0..options.workers {
        let worker = Worker { id, pool: pool.clone(), loaded: loaded.clone(), options: options.clone(), metrics: metrics.clone() };
        let (wake, shutdown) = (wake.clone(), shutdown.clone());
        workers.spawn(async move { worker.run(wake, shutdown).await });
    }
    while workers.join_next().await.is_some() {}
}

struct Worker {
    id: usize,
    pool: Pool,
    loaded: Arc<Loaded>,
    options: Options,
    metrics: Arc<Metrics>,
}

impl Worker {
    async fn run(self, mut wake: watch::Receiver<u64>, shutdown: CancellationToken) {
        let mut idle = Duration::from_millis(10);
        let mut slots = SlotCache::default();
        let mut registry = self.loaded.load_full();
        let mut tasks = registry.tasks();
        while !shutdown.is_cancelled() {
            let conn = match crate::db::connect(&self.pool, &shutdown).await {
                Ok(conn) => Arc::new(conn),
                Err(_) => return,
            };
            while !shutdown.is_cancelled() {
                // Claim for the tasks loaded now (recomputed only when a reload swapped
                // the registry).
                let now = self.loaded.load_full();
                if !Arc::ptr_eq(&now, &registry) {
                    tasks = now.tasks();
                    registry = now;
                }
                let result = run_batch(&conn, &self.loaded, &tasks, &self.options, &mut slots).await;
                if let Ok(outcome) = &result {
                    for (task, end, elapsed) in &outcome.jobs {
                        self.metrics.record_job(task, *end, *elapsed);
                    }
                }
                match result {
                    Ok(outcome) if outcome.retire_connection => {
                        tracing::debug!(worker = self.id, "replacing a connection that carried a cancel request");
                        discard(conn);
                        break;
                    }
                    Ok(outcome) if outcome.claimed > 0 => idle = Duration::from_millis(10),
                    Ok(_) => crate::wake::idle(&mut wake, &mut idle, self.options.poll_interval, &shutdown).await,
                    Err(e) => {
                        tracing::warn!(worker = self.id, "worker lost its database connection, reconnecting: {}", crate::db::error_chain(&e));
                        discard(conn);
                        break;
                    }
                }
            }
        }
    }
}

/// The WIT slot of each (task, slot start), computed once: every job of a slot shares it,
/// and computing its end and label costs more than the rest of the claim.
#[derive(Default)]
pub struct SlotCache {
    slots: HashMap<(String, DateTime<Utc>), Slot>,
}

impl SlotCache {
    const CAPACITY: usize = 1024;

    fn get(&mut self, plugin: &crate::plugin::Plugin, start: DateTime<Utc>) -> Slot {
        // By digest: a reloaded plugin may have another schedule.
        let key = (plugin.digest.clone(), start);
        if let Some(slot) = self.slots.get(&key) {
            return slot.clone();
        }
        if self.slots.len() >= Self::CAPACITY {
            self.slots.clear();
        }
        let schedule = &plugin.spec.schedule;
        let info = schedule.slot_at(start);
        let slot = Slot {
            start: start.timestamp_micros(),
            end: info.end.timestamp_micros(),
            label: info.label,
            zone: schedule.zone().name().to_owned(),
        };
        self.slots.insert(key, slot.clone());
        slot
    }
}

/// Drop a connection that may be mid-transaction instead of returning it to the pool.
fn discard(conn: Arc<Object>) {
    if let Ok(conn) = Arc::try_unwrap(conn) {
        drop(Object::take(conn));
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error("{0}")]
    ConnectionLost(String),
}

/// One transaction: claim, run each job under a savepoint, record, commit.
///
/// The host's own statements are pipelined (sent together, answered together), so a job
/// costs one round trip before the plugin runs and one after: BEGIN + claim + the first
/// SAVEPOINT, then RELEASE (or ROLLBACK TO) + the job's record + the next SAVEPOINT (or
/// COMMIT). If any of them fails, the error is returned and the connection dropped; the
/// transaction never commits.
pub async fn run_batch(
    conn: &Arc<Object>,
    loaded: &Loaded,
    tasks: &[String],
    options: &Options,
    slots: &mut SlotCache,
) -> Result<BatchOutcome, BatchError> {
    let mut outcome = BatchOutcome::default();
    // Prepared before any plugin runs: a statement is parsed under the role current at
    // the time, and a plugin's role may not even look into schema almanac.
    let (claim, done, failed) = try_join3(conn.prepare_cached(CLAIM), conn.prepare_cached(MARK_DONE), conn.prepare_cached(MARK_FAILED)).await?;
    let statements = Statements { done, failed };
    let limit = options.batch as i64;
    let (_, rows, _) = try_join3(conn.batch_execute("BEGIN"), conn.query(&claim, &[&tasks, &limit]), conn.batch_execute("SAVEPOINT job")).await?;
    outcome.claimed = rows.len();
    // Invariant at the top of the loop: a savepoint "job" is open and unused.
    for (i, row) in rows.iter().enumerate() {
        let follow = if i + 1 == rows.len() { "COMMIT" } else { "SAVEPOINT job" };
        let task: String = row.get(0);
        let slot: DateTime<Utc> = row.get(1);
        let key: String = row.get(2);
        let attempts: i32 = row.get(3);
        let payload: Option<String> = row.get(4);
        // Each job runs on the version loaded when it starts, and finishes on it even if a
        // reload swaps in another meanwhile.
        let Some(plugin) = loaded.load().get(&task).cloned() else {
            // Not ours after all: leave it pending for a host that has the plugin.
            if follow == "COMMIT" {
                conn.batch_execute("COMMIT").await?;
            }
            continue;
        };
        let job = Job {
            task: task.clone(),
            slot: slots.get(&plugin, slot),
            key: key.clone(),
            attempt: u32::try_from(attempts).unwrap_or(0) + 1,
            payload,
        };
        let span = tracing::info_span!("job", task = %task, slot = %job.slot.label, key = %key, attempt = job.attempt);
        let run = run_job(conn, &statements, &plugin, &job, slot, options, follow).instrument(span).await?;
        outcome.retire_connection |= run.cancelled;
        outcome.jobs.push((task, run.end, run.elapsed));
    }
    if rows.is_empty() {
        conn.batch_execute("COMMIT").await?;
    }
    Ok(outcome)
}

/// The host's own per-job statements, prepared on this connection.
struct Statements {
    done: tokio_postgres::Statement,
    failed: tokio_postgres::Statement,
}

/// How one job ended, and whether its connection carried a cancel request.
struct JobRun {
    end: JobEnd,
    elapsed: Duration,
    cancelled: bool,
}

/// Run one claimed job in the open savepoint, record the result and send `follow`
/// (the next SAVEPOINT, or COMMIT) in the same round trip.
async fn run_job(
    conn: &Arc<Object>,
    statements: &Statements,
    plugin: &crate::plugin::Plugin,
    job: &Job,
    slot: DateTime<Utc>,
    options: &Options,
    follow: &str,
) -> Result<JobRun, BatchError> {
    let (task, key) = (&job.task, &job.key);
    let started = std::time::Instant::now();
    let result = plugin.run(conn, job).await;
    let elapsed = started.elapsed();
    match result {
        Ok(()) => {
            // RESET ROLE first: the plugin's role must not outlive its call.
            try_join3(
                conn.batch_execute("RESET ROLE; RELEASE SAVEPOINT job"),
                conn.execute(&statements.done, &[task, &slot, key, &plugin.digest]),
                conn.batch_execute(follow),
            )
            .await?;
            tracing::debug!(?elapsed, "job done");
            Ok(JobRun { end: JobEnd::Done, elapsed, cancelled: false })
        }
        Err(CallError::ConnectionLost(why)) => Err(BatchError::ConnectionLost(why)),
        Err(e) => {
            let cancelled = matches!(e, CallError::Deadline { cancelled: true, .. });
            let give_up = !e.retryable() || job.attempt >= plugin.spec.max_attempts;
            let delay = crate::backoff::delay(options.retry_base, options.retry_max, job.attempt);
            let message = e.to_string();
            // ROLLBACK TO undoes the plugin's writes and its SET LOCAL ROLE together.
            try_join3(
                conn.batch_execute("ROLLBACK TO SAVEPOINT job"),
                conn.execute(&statements.failed, &[task, &slot, key, &message, &give_up, &delay.as_secs_f64(), &plugin.digest]),
                conn.batch_execute(follow),
            )
            .await?;
            if give_up {
                tracing::warn!(error = %message, "job failed for good");
            } else {
                tracing::info!(error = %message, retry_in = ?delay, "job attempt failed");
            }
            let end = if give_up { JobEnd::Failed } else { JobEnd::Retried };
            Ok(JobRun { end, elapsed, cancelled })
        }
    }
}
