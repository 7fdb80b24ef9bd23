//! Claim -> run -> commit. Each worker owns one connection and loops: claim up to
//! `batch` due jobs `FOR UPDATE SKIP LOCKED` and mark them done in the same statement,
//! run each under its own savepoint (a failure rolls back to it and records the failed
//! attempt over the mark), commit.
//!
//! A crash anywhere before COMMIT rolls back the plugin's writes and the done mark
//! together, and releases the row locks: the jobs are simply pending again.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Object, Pool};
use futures_util::future::{try_join, try_join3, try_join4};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bindings::almanac::plugin::types::{Job, Slot};
use crate::capability::db::END_CALL;
use crate::db::Prepared;
use crate::job::JobEnd;
use crate::metrics::Metrics;
use crate::plugin::{CallError, Loaded};

pub mod claims;
pub mod operate;

const CLAIM: &str = include_str!("claim.sql");

/// The claim for `batch` jobs at a time (claim.sql, its size written in): one text per
/// batch size, kept for the life of the process, as prepared statements want.
pub fn claim_sql(batch: usize, floor: Option<DateTime<Utc>>) -> &'static str {
    static TEXTS: std::sync::Mutex<Vec<(usize, Option<DateTime<Utc>>, &'static str)>> = std::sync::Mutex::new(Vec::new());
    let mut texts = TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, sql)) = texts.iter().find(|(n, f, _)| *n == batch && *f == floor) {
        return sql;
    }
    let from = floor.map_or_else(|| "-infinity".to_owned(), |f| f.to_rfc3339());
    let sql: &'static str = Box::leak(CLAIM.replace("{batch}", &batch.to_string()).replace("{floor}", &from).into_boxed_str());
    texts.push((batch, floor, sql));
    sql
}
const MARK_FAILED: &str = include_str!("mark_failed.sql");
const CLAIM_ONE: &str = include_str!("claim_one.sql");
const UNCLAIM: &str = include_str!("unclaim.sql");
/// Around the claim, in the messages already sent with it: the claim has one sane plan —
/// each month's pending index read in order and merged (no Sort, no table scan), and the
/// rows it locked marked by a nested loop into their partition's primary key (no hash or
/// merge join, which read every partition whole). The planner picks another whenever the
/// statistics say the partitions are small: a month just made and not analyzed yet (the
/// benchmark measured 2,960 jobs/s at --batch 32 on such a month, 9,080 once analyzed),
/// and a cached plan keeps it after the month has filled. So the alternatives are off
/// for the claim alone (`SET LOCAL`), and back to the defaults before any plugin statement.
const CLAIM_BEGIN: &str = "BEGIN; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; \
     SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off";
const CLAIM_END: &str = "RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_seqscan; RESET enable_bitmapscan; \
     RESET enable_sort; SAVEPOINT job";

/// Executor settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Concurrent workers, each with its own connection. Defaults to 4.
    pub workers: usize,
    /// Jobs claimed per transaction. Defaults to 1 (one job per transaction).
    pub batch: usize,
    /// A batch starts no job after running this long; the rest go back pending.
    /// Defaults to 2 s.
    pub batch_time: Duration,
    /// First retry delay; doubles per attempt, with jitter. Defaults to 1 s.
    pub retry_base: Duration,
    /// Longest retry delay. Defaults to 1 h.
    pub retry_max: Duration,
    /// Polling interval when idle and no notification arrives. Defaults to 1 s.
    pub poll_interval: Duration,
    /// A job whose host (or connection) ended this many times while running it is
    /// failed without running again, so it cannot take down host after host.
    /// Defaults to 3.
    pub poison_after: i32,
    /// How often orphaned claims are swept (`claims::sweep`). Defaults to 1 s.
    pub sweep_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 4,
            batch: 1,
            batch_time: Duration::from_secs(2),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            poison_after: 3,
            sweep_interval: Duration::from_secs(1),
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
    /// Jobs claimed with others that a crash marked: each runs alone next.
    pub alone: Vec<(String, DateTime<Utc>, String)>,
}

/// Which jobs a batch claims.
pub enum Claim<'a> {
    /// Up to the batch size of the due jobs of these tasks.
    Due(&'a [String]),
    /// One named job (task, slot, key).
    One(&'a (String, DateTime<Utc>, String)),
}

/// What every batch of one worker shares.
pub struct Context {
    pub loaded: Arc<Loaded>,
    pub options: Options,
    pub recorder: claims::Recorder,
    pub floor: crate::history::ClaimFloor,
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
    let host = format!("{} pid {}", crate::db::hostname(), std::process::id());
    let recorder = claims::Recorder::start(pool.clone(), host, shutdown.clone());
    let context = Arc::new(Context { loaded, options: options.clone(), recorder, floor: Default::default() });
    claims::sweep_once(&pool, &shutdown).await;
    let mut workers = tokio::task::JoinSet::new();
    workers.spawn(claims::sweep_loop(pool.clone(), options.sweep_interval, shutdown.clone()));
    for id in 0..options.workers {
        let worker = Worker { id, pool: pool.clone(), context: context.clone(), metrics: metrics.clone() };
        let (wake, shutdown) = (wake.clone(), shutdown.clone());
        workers.spawn(async move { worker.run(wake, shutdown).await });
    }
    while workers.join_next().await.is_some() {}
}

struct Worker {
    id: usize,
    pool: Pool,
    context: Arc<Context>,
    metrics: Arc<Metrics>,
}

impl Worker {
    async fn run(self, mut wake: watch::Receiver<u64>, shutdown: CancellationToken) {
        let mut idle = Duration::from_millis(10);
        let mut slots = SlotCache::default();
        let mut registry = self.context.loaded.load_full();
        let mut suspensions = crate::plugin::suspensions();
        let mut tasks = registry.tasks();
        let mut alone = std::collections::VecDeque::new();
        while !shutdown.is_cancelled() {
            let conn = match crate::db::connect(&self.pool, &shutdown).await {
                Ok(conn) => Arc::new(conn),
                Err(_) => return,
            };
            let backend = match claims::Backend::of(&conn).await {
                Ok(backend) => backend,
                Err(e) => {
                    tracing::warn!(worker = self.id, "worker lost its database connection, reconnecting: {}", crate::db::error_chain(&e));
                    discard(conn);
                    continue;
                }
            };
            while !shutdown.is_cancelled() {
                // Claim for the tasks loaded now (recomputed only when a reload swapped
                // the registry).
                let now = self.context.loaded.load_full();
                if !Arc::ptr_eq(&now, &registry) || suspensions != crate::plugin::suspensions() {
                    suspensions = crate::plugin::suspensions();
                    tasks = now.tasks();
                    registry = now;
                }
                let one = alone.front().cloned();
                let claim = match &one {
                    Some(job) => Claim::One(job),
                    None => Claim::Due(&tasks),
                };
                let result = run_batch(&conn, backend, &self.context, claim, &mut slots).await;
                if let Ok(outcome) = &result {
                    if one.is_some() {
                        alone.pop_front();
                    }
                    for (task, end, elapsed) in &outcome.jobs {
                        self.metrics.record_job(task, *end, *elapsed);
                    }
                    alone.extend(outcome.alone.iter().cloned());
                }
                match result {
                    Ok(outcome) if outcome.retire_connection => {
                        tracing::debug!(worker = self.id, "replacing a connection that carried a cancel request");
                        discard(conn);
                        break;
                    }
                    Ok(outcome) if outcome.claimed > 0 || !alone.is_empty() => idle = Duration::from_millis(10),
                    Ok(_) => crate::wake::idle(&mut wake, &mut idle, self.context.options.poll_interval, &shutdown).await,
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
    slots: HashMap<(String, i64, DateTime<Utc>), Slot>,
}

impl SlotCache {
    const CAPACITY: usize = 1024;

    fn get(&mut self, plugin: &crate::plugin::Plugin, start: DateTime<Utc>) -> Slot {
        // By digest and revision: a reloaded plugin, or an applied change, may bring
        // another schedule.
        let applied = plugin.applied();
        let key = (plugin.digest.clone(), applied.revision, start);
        if let Some(slot) = self.slots.get(&key) {
            return slot.clone();
        }
        if self.slots.len() >= Self::CAPACITY {
            self.slots.clear();
        }
        let slot = applied.wit_slot(&applied.slot_at(start));
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

/// One transaction: claim, record the claim, run each job under a savepoint, record
/// its end, commit.
///
/// The host's own statements are pipelined (sent together, answered together), so a job
/// costs one round trip before the plugin runs and one after: BEGIN + claim + the first
/// SAVEPOINT ([`CLAIM_BEGIN`], [`CLAIM_END`]), then RELEASE (or ROLLBACK TO) + the job's record + the next SAVEPOINT (or
/// COMMIT). If any of them fails, the error is returned and the connection dropped; the
/// transaction never commits.
pub async fn run_batch(
    conn: &Arc<Object>,
    backend: claims::Backend,
    context: &Context,
    claim: Claim<'_>,
    slots: &mut SlotCache,
) -> Result<BatchOutcome, BatchError> {
    let options = &context.options;
    let mut outcome = BatchOutcome::default();
    // Prepared before any plugin runs: a statement is parsed under the role current at
    // the time, and a plugin's role may not even look into schema almanac. (Through a
    // pooler each is sent unnamed after the host's RESET ROLE, to the same effect.)
    let floor = context.floor.get(&**conn).await?;
    let (claim_due, claim_one, unclaim, failed) =
        try_join4(Prepared::on(conn, claim_sql(options.batch, floor)), Prepared::on(conn, CLAIM_ONE), Prepared::on(conn, UNCLAIM), Prepared::on(conn, MARK_FAILED)).await?;
    let statements = Statements { failed };
    // The jobs are marked done by the plugins loaded now, and run on them: a reload
    // during the batch takes effect with the next one.
    let registry = context.loaded.load_full();
    let digest = |task: &str| registry.get(task).map(|p| p.digest.clone()).unwrap_or_default();
    let claimed = async {
        match claim {
            Claim::Due(tasks) => {
                let digests: Vec<String> = tasks.iter().map(|t| digest(t)).collect();
                claim_due.rows(conn, &[&tasks, &digests]).await
            }
            Claim::One((task, slot, key)) => claim_one.rows(conn, &[task, slot, key, &digest(task)]).await,
        }
    };
    let (_, rows, _) = try_join3(conn.batch_execute(CLAIM_BEGIN), claimed, conn.batch_execute(CLAIM_END)).await?;
    outcome.claimed = rows.len();
    let mut rows: Vec<Claimed> = rows.iter().map(Claimed::from).collect();
    // In the claim's order (an UPDATE returns its rows in no particular order).
    rows.sort_by(|a, b| (a.run_after, a.slot, &a.task, &a.key).cmp(&(b.run_after, b.slot, &b.task, &b.key)));
    // A job a crash marked runs alone: in a batch of several it waits for its own.
    let (rows, alone): (Vec<Claimed>, Vec<Claimed>) = if rows.len() > 1 { rows.into_iter().partition(|r| r.crashes == 0) } else { (rows, Vec::new()) };
    // The claim marked them done: pending again, as they were, for their own claim.
    for row in &alone {
        unclaim.exec(conn, &[&row.task, &row.slot, &row.key, &row.last_error, &row.digest]).await?;
    }
    outcome.alone = alone.into_iter().map(|r| (r.task, r.slot, r.key)).collect();
    if !rows.is_empty() {
        let held = rows.iter().map(|r| claims::Held { task: r.task.clone(), slot: r.slot, key: r.key.clone(), attempts: r.attempts }).collect();
        if let Err(e) = context.recorder.record(backend, held).await {
            return Err(BatchError::ConnectionLost(e.to_string()));
        }
    }
    // Invariant at the top of the loop: a savepoint "job" is open and unused, and the
    // role is the host's, or (`role_set`) the plugin's of this job's task.
    let mut role_set = false;
    let started = std::time::Instant::now();
    for (i, row) in rows.iter().enumerate() {
        if i > 0 && started.elapsed() >= options.batch_time {
            // Long enough: the jobs not started go back pending for the next claim, so
            // the transaction (its locks, VACUUM's horizon) stays short.
            put_back(conn, &unclaim, &rows[i..], role_set).await?;
            outcome.claimed = i;
            break;
        }
        let follow = match rows.get(i + 1) {
            None => Follow::Commit,
            Some(next) if next.task == row.task => Follow::SavepointSameTask,
            Some(_) => Follow::Savepoint,
        };
        // Each job runs on the version loaded when it starts, and finishes on it even if a
        // reload swaps in another meanwhile.
        let Some(plugin) = registry.get(&row.task).cloned() else {
            // Not ours after all: pending again, as it was, for a host that has the plugin.
            if std::mem::take(&mut role_set) {
                conn.batch_execute(END_CALL).await?;
            }
            try_join(unclaim.exec(conn, &[&row.task, &row.slot, &row.key, &row.last_error, &row.digest]), conn.batch_execute(follow.sql())).await?;
            continue;
        };
        let job = Job {
            task: row.task.clone(),
            slot: slots.get(&plugin, row.slot),
            key: row.key.clone(),
            attempt: u32::try_from(row.attempts).unwrap_or(0) + 1,
            payload: row.payload.clone(),
        };
        let span = tracing::info_span!("job", task = %row.task, slot = %job.slot.label, key = %row.key, attempt = job.attempt);
        let run = if row.crashes >= options.poison_after {
            poisoned(conn, &statements, &plugin, row, follow).instrument(span).await?
        } else {
            run_job(conn, &statements, &plugin, &job, row.slot, options, (role_set, follow)).instrument(span).await?
        };
        role_set = run.role_set;
        outcome.retire_connection |= run.cancelled;
        outcome.jobs.push((row.task.clone(), run.end, run.elapsed));
    }
    if rows.is_empty() {
        conn.batch_execute("COMMIT").await?;
    }
    Ok(outcome)
}

/// Claimed jobs a batch does not run: pending again, exactly as they were, then COMMIT
/// (the open savepoint commits with it; a role left set is reset first).
async fn put_back(conn: &Arc<Object>, unclaim: &Prepared, rows: &[Claimed], role_set: bool) -> Result<(), BatchError> {
    if role_set {
        conn.batch_execute(END_CALL).await?;
    }
    // Sent together, answered together: one round trip.
    let params: Vec<[&dyn crate::db::Param; 5]> = rows.iter().map(|r| [&r.task as &dyn crate::db::Param, &r.slot, &r.key, &r.last_error, &r.digest]).collect();
    futures_util::future::try_join_all(params.iter().map(|p| unclaim.exec(conn, p))).await?;
    conn.batch_execute("COMMIT").await?;
    tracing::debug!(jobs = rows.len(), "batch time spent: jobs put back for the next claim");
    Ok(())
}

/// One claimed row.
struct Claimed {
    task: String,
    slot: DateTime<Utc>,
    key: String,
    /// Attempts before this one.
    attempts: i32,
    payload: Option<String>,
    crashes: i32,
    /// As they were before the claim marked the job done.
    last_error: Option<String>,
    digest: Option<String>,
    run_after: DateTime<Utc>,
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
        }
    }
}

/// What follows a job in the same round trip.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Follow {
    /// The next job's savepoint; the next job is another task's.
    Savepoint,
    /// The next job's savepoint; the next job is the same task's, so its plugin's role
    /// may stay set: one SET LOCAL ROLE for a run of jobs instead of a switch per job.
    SavepointSameTask,
    /// The batch's end.
    Commit,
}

impl Follow {
    fn sql(self) -> &'static str {
        match self {
            Follow::Savepoint | Follow::SavepointSameTask => "SAVEPOINT job",
            Follow::Commit => "COMMIT",
        }
    }

    /// What follows a successful call that left its plugin's role set: [`END_CALL`]
    /// when another task's job follows; else only RESET ALL (a function the plugin may
    /// call can change session settings, which must not reach the next job or outlive
    /// the transaction), as the role stays for the same task's next job and a SET LOCAL
    /// ROLE ends with the transaction anyway.
    fn after_call(self) -> &'static str {
        match self {
            Follow::Savepoint => {
                static NEXT_TASK: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("{END_CALL}; SAVEPOINT job"));
                &NEXT_TASK
            }
            Follow::SavepointSameTask => "RESET ALL; SAVEPOINT job",
            Follow::Commit => "RESET ALL; COMMIT",
        }
    }
}

/// Rolls a failed job back to its savepoint, and the role to the host's: a role its
/// task's previous job left set was set before the savepoint, so the rollback keeps it.
static ROLLBACK_JOB: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("ROLLBACK TO SAVEPOINT job; {END_CALL}"));

/// Fail a job that its hosts kept dying on, without running it again.
async fn poisoned(conn: &Arc<Object>, statements: &Statements, plugin: &crate::plugin::Plugin, row: &Claimed, follow: Follow) -> Result<JobRun, BatchError> {
    let message = crate::text::clip(
        format!(
            "not run again: the host running it ended {} times before the job did (last: {})",
            row.crashes,
            row.last_error.as_deref().unwrap_or("unknown")
        ),
        crate::text::MAX_ERROR,
    );
    let failure = Failure { message: &message, give_up: true, delay: Duration::ZERO, digest: &plugin.digest };
    record_failure(conn, statements, (&row.task, row.slot, &row.key), failure, follow).await?;
    tracing::error!(error = %message, "job failed for good");
    Ok(JobRun { end: JobEnd::Failed, elapsed: Duration::ZERO, cancelled: false, role_set: false })
}

/// A failed attempt as recorded.
struct Failure<'a> {
    message: &'a str,
    /// Fail the job for good rather than retry it after `delay`.
    give_up: bool,
    delay: Duration,
    digest: &'a str,
}

/// Roll the job's savepoint back (its writes and the plugin's role together), record the
/// failed attempt and send `follow`, in one round trip.
async fn record_failure(
    conn: &Arc<Object>,
    statements: &Statements,
    (task, slot, key): (&str, DateTime<Utc>, &str),
    failure: Failure<'_>,
    follow: Follow,
) -> Result<(), BatchError> {
    let Failure { message, give_up, delay, digest } = failure;
    try_join3(
        conn.batch_execute(&ROLLBACK_JOB),
        statements.failed.exec(conn, &[&task, &slot, &key, &message, &give_up, &delay.as_secs_f64(), &digest]),
        conn.batch_execute(follow.sql()),
    )
    .await?;
    Ok(())
}

/// The host's own per-job statements, prepared on this connection.
struct Statements {
    failed: Prepared,
}

/// How one job ended, whether its connection carried a cancel request, and whether its
/// plugin's role is still set (for the same task's next job).
struct JobRun {
    end: JobEnd,
    elapsed: Duration,
    cancelled: bool,
    role_set: bool,
}

/// Run one claimed job in the open savepoint (`role_set`: with its plugin's role set
/// already) and send `follow` (the next SAVEPOINT, or COMMIT): its done mark is the
/// claim's. A failure is recorded in the same round trip.
async fn run_job(
    conn: &Arc<Object>,
    statements: &Statements,
    plugin: &crate::plugin::Plugin,
    job: &Job,
    slot: DateTime<Utc>,
    options: &Options,
    (role_set, follow): (bool, Follow),
) -> Result<JobRun, BatchError> {
    let (task, key) = (&job.task, &job.key);
    let started = std::time::Instant::now();
    let called = plugin.run(conn, job, role_set).await;
    let elapsed = started.elapsed();
    let cancelled = called.ending.cancel_sent;
    match called.result {
        Ok(()) => {
            // The plugin's role must not outlive its task's jobs. The savepoint is not
            // released: the next one nests in it, and COMMIT ends them all (a released
            // subtransaction stays in the backend's subtransaction cache until then anyway).
            match called.ending.role_used {
                true => conn.batch_execute(follow.after_call()).await?,
                false => conn.batch_execute(follow.sql()).await?,
            }
            tracing::debug!(?elapsed, "job done");
            let role_set = called.ending.role_used && follow == Follow::SavepointSameTask;
            Ok(JobRun { end: JobEnd::Done, elapsed, cancelled, role_set })
        }
        Err(CallError::ConnectionLost(why)) => Err(BatchError::ConnectionLost(why)),
        Err(e) => {
            let give_up = !e.retryable() || job.attempt >= plugin.spec.max_attempts;
            let delay = crate::backoff::delay(options.retry_base, options.retry_max, job.attempt);
            let message = crate::text::clip(e.to_string(), crate::text::MAX_STORED);
            let failure = Failure { message: &message, give_up, delay, digest: &plugin.digest };
            record_failure(conn, statements, (task, slot, key), failure, follow).await?;
            if give_up {
                tracing::warn!(error = %message, "job failed for good");
            } else {
                tracing::info!(error = %message, retry_in = ?delay, "job attempt failed");
            }
            let end = if give_up { JobEnd::Failed } else { JobEnd::Retried };
            Ok(JobRun { end, elapsed, cancelled, role_set: false })
        }
    }
}
