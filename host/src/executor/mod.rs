//! Claim -> run -> commit. Each worker loops over the tasks loaded: in a session of a
//! task's own login ([`crate::login`]) it claims up to `batch` of that task's due jobs
//! `FOR UPDATE SKIP LOCKED` and marks them done in the same statement
//! (`almanac_job.claim`, which touches that task's rows only), runs each under its own
//! savepoint (a failure rolls back to it and records the failed attempt over the mark),
//! and commits. The plugin's statements and the host's bookkeeping share that one
//! transaction; the session user is the plugin's role throughout.
//!
//! A crash anywhere before COMMIT rolls back the plugin's writes and the done mark
//! together, and releases the row locks: the jobs are simply pending again.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::{Conn, Pool};
use chrono::{DateTime, Utc};
use futures_util::future::try_join4;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bindings::almanac::plugin::types::{Job, Slot};
use crate::db::Prepared;
use crate::job::JobEnd;
use crate::login::Logins;
use crate::metrics::Metrics;
use crate::plugin::{CallError, Loaded};

mod batch;
pub mod claims;
mod idle;
pub mod operate;
mod record;
pub mod share;
pub mod transient;

pub use batch::BatchError;
use batch::{Claimed, JobRun, COMMIT};
use record::{poisoned, record_failure, Failure, Follow, InFlight, Statements};

const CLAIM: &str = include_str!("claim.sql");
const MARK_FAILED: &str = include_str!("mark_failed.sql");
const CLAIM_ONE: &str = include_str!("claim_one.sql");
const UNCLAIM: &str = include_str!("unclaim.sql");
const ALONE: &str = include_str!("alone.sql");
/// Executor settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Concurrent workers, each with its own connection. Defaults to 4.
    pub workers: usize,
    /// The most jobs claimed per transaction. Each worker starts a task at one and
    /// doubles while claims come back full ([`batch::next_size`]). Defaults to 32; 1 is
    /// one job per transaction.
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
    /// A LISTEN connection wakes idle workers: only one of them looks without a
    /// notification, at when the database says the next job comes due ([`idle`]).
    /// Defaults to false (every worker polls every `poll_interval`).
    pub listening: bool,
    /// A job whose host (or connection) ended this many times while running it is
    /// failed without running again, so it cannot take down host after host.
    /// Defaults to 3.
    pub poison_after: i32,
    /// A task charged with `poison_after` server crashes within this long is held.
    /// Defaults to 24 h.
    pub poison_window: Duration,
    /// How often orphaned claims are swept (`claims::sweep`). Defaults to 1 s.
    pub sweep_interval: Duration,
    /// Workers one task's batches may hold at once ([`share::per_task`]). Defaults to
    /// all but one when the host serves more than one task, else all.
    pub task_workers: Option<usize>,
    /// Transient interruptions (a deadlock, a serialization failure, a server that
    /// went away) a job may have before it fails: a budget of their own, never counted
    /// against the task's `max_attempts`. Defaults to [`transient::BUDGET`].
    pub transient_retries: i32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 4,
            batch: 32,
            batch_time: Duration::from_secs(2),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            listening: false,
            poison_after: 3,
            poison_window: Duration::from_secs(24 * 3600),
            sweep_interval: Duration::from_secs(1),
            task_workers: None,
            transient_retries: transient::BUDGET,
        }
    }
}

impl Options {
    /// What the claims sweep counts against.
    pub fn budgets(&self) -> claims::Budgets {
        claims::Budgets { transient: self.transient_retries, poison_after: self.poison_after, poison_window: self.poison_window }
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
    /// `batch_time` ended it before every job claimed had run.
    pub cut: bool,
    /// Jobs a deadlock or a serialization failure interrupted.
    pub conflicts: usize,
}

/// Which jobs a batch claims.
pub enum Claim<'a> {
    /// Up to this many of the task's due jobs.
    Due(usize),
    /// One named job of the task (slot, key).
    One(DateTime<Utc>, &'a str),
}

/// What every batch of one worker shares.
pub struct Context {
    /// This host, as its claims and the attempts it records name it.
    pub host: String,
    pub loaded: Arc<Loaded>,
    pub options: Options,
    pub recorder: claims::Recorder,
    pub floor: crate::history::ClaimFloor,
    /// Where each task's jobs run: sessions of its login.
    pub logins: Arc<Logins>,
    /// The workers on each task now.
    pub busy: Arc<share::Busy>,
    /// Held by the sweep running now ([`claims::sweep_once`]), with the batches running.
    pub sweeping: Arc<claims::SweepGate>,
    /// Wakes the idle workers: every notification, a poll that found jobs, a task's
    /// concurrency raised.
    pub nudge: watch::Sender<u64>,
    /// Taken by the idle worker that looks without a notification ([`idle::wait`]).
    pub poller: std::sync::atomic::AtomicBool,
}

/// Run `options.workers` workers until `shutdown`; in-flight batches finish first.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    pool: Pool,
    logins: Arc<Logins>,
    loaded: Arc<Loaded>,
    options: Options,
    metrics: Arc<Metrics>,
    busy: Arc<share::Busy>,
    wake: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    let host = crate::db::this_host();
    let recorder = claims::Recorder::start(pool.clone(), host.clone(), shutdown.clone());
    let (nudge, local) = watch::channel(0u64);
    let context = Arc::new(Context {
        host,
        loaded,
        options: options.clone(),
        recorder,
        floor: Default::default(),
        logins,
        busy,
        sweeping: Default::default(),
        nudge,
        poller: Default::default(),
    });
    claims::sweep_once(&pool, options.budgets(), &context.sweeping, &shutdown).await;
    let mut workers = tokio::task::JoinSet::new();
    workers.spawn(forward(wake, context.clone(), shutdown.clone()));
    workers.spawn(claims::sweep_loop(pool.clone(), options.sweep_interval, options.budgets(), context.sweeping.clone(), shutdown.clone()));
    for id in 0..options.workers {
        let worker = Worker { id, pool: pool.clone(), context: context.clone(), metrics: metrics.clone() };
        let (wake, shutdown) = (local.clone(), shutdown.clone());
        workers.spawn(async move { worker.run(wake, shutdown).await });
    }
    while workers.join_next().await.is_some() {}
}

/// Every notification, on to the workers' own channel (which a poll that found jobs
/// also sends on).
async fn forward(mut wake: watch::Receiver<u64>, context: Arc<Context>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            changed = wake.changed() => if changed.is_err() { return },
            _ = shutdown.cancelled() => return,
        }
        context.nudge.send_modify(|n| *n += 1);
    }
}

struct Worker {
    id: usize,
    pool: Pool,
    context: Arc<Context>,
    metrics: Arc<Metrics>,
}

/// A session of one task's login a worker holds between batches, and its backend.
struct Session {
    task: String,
    conn: Arc<Conn>,
    backend: claims::Backend,
}

impl Worker {
    async fn run(self, mut wake: watch::Receiver<u64>, shutdown: CancellationToken) {
        let mut idle = Duration::from_millis(10);
        let mut slots = SlotCache::default();
        let mut registry = self.context.loaded.load_full();
        let mut suspensions = registry.suspensions();
        let mut tasks = registry.tasks();
        // Jobs a crash marked, each to run alone in a batch of its own.
        let mut alone = std::collections::VecDeque::new();
        let mut quiet = idle::Quiet::default();
        // Worker i starts its round at task i, so workers spread over the tasks.
        let mut next = self.id;
        // The next claim's size for each task (batch::next_size).
        let mut sizes: HashMap<String, usize> = HashMap::new();
        let mut session: Option<Session> = None;
        // Whether the last wait ended by its delay rather than a notification.
        let mut polled = false;
        let options = &self.context.options;
        while !shutdown.is_cancelled() {
            // Claim for the tasks loaded now (recomputed only when a reload swapped the
            // registry or a plugin was suspended or resumed).
            let now = self.context.loaded.load_full();
            if !Arc::ptr_eq(&now, &registry) || suspensions != now.suspensions() {
                suspensions = now.suspensions();
                tasks = now.tasks();
                registry = now;
            }
            if self.context.floor.stale() {
                if let Ok(host) = self.pool.get().await {
                    if let Err(e) = self.context.floor.get(&host).await {
                        tracing::debug!("claim floor: {}", crate::db::error_chain(&e));
                    }
                }
            }
            // Seen before the claim looks: one arriving meanwhile ends the idle wait.
            wake.borrow_and_update();
            let one: Option<(String, DateTime<Utc>, String)> = alone.front().cloned();
            let share = share::per_task(self.context.options.workers, tasks.len(), self.context.options.task_workers);
            let taken = match &one {
                Some((task, _, _)) => Some((task.clone(), None)),
                None => {
                    let at = Instant::now();
                    let open: Vec<&String> = tasks.iter().filter(|t| quiet.open(t, at)).collect();
                    next = next.wrapping_add(1);
                    // The first task, in turn from this worker's place, with room for it.
                    (0..open.len()).map(|i| open[(next + i) % open.len()]).find_map(|t| self.context.busy.take(t, share).map(|p| (t.clone(), Some(p))))
                }
            };
            let Some((task, place)) = taken else {
                let waiting = idle::Waiting {
                    listening: options.listening,
                    poll_interval: options.poll_interval,
                    poller: &self.context.poller,
                    loaded: &self.context.loaded,
                    sweeping: &self.context.sweeping,
                    pool: &self.pool,
                };
                polled = idle::wait(&waiting, &tasks, &mut quiet, &mut wake, &mut idle, &shutdown).await;
                continue;
            };
            // The session of this worker's last task serves again; another task's goes
            // back to its pool.
            if session.as_ref().is_some_and(|s| s.task != task) {
                session = None;
            }
            if session.is_none() {
                match self.open(&task, &shutdown).await {
                    Ok(opened) => session = Some(opened),
                    Err(e) => {
                        tracing::warn!(worker = self.id, task = %task, "cannot open a session of the task's login, retrying: {e}");
                        quiet.rest(task, self.context.options.poll_interval);
                        if shutdown.is_cancelled() {
                            return;
                        }
                        // Its place goes to another worker meanwhile.
                        drop(place);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                }
            }
            let Some(current) = &mut session else { continue };
            let size = sizes.get(&task).copied().unwrap_or(1);
            let claim = match &one {
                Some((_, slot, key)) => Claim::One(*slot, key),
                None => Claim::Due(size),
            };
            let mut hold = claims::Hold::new(self.context.sweeping.clone());
            let result = run_batch(&current.conn, &mut current.backend, &self.context, &task, claim, &mut slots, &mut hold).await;
            if let Ok(outcome) = &result {
                hold.release();
                if one.is_some() {
                    alone.pop_front();
                }
                for (task, end, elapsed) in &outcome.jobs {
                    self.metrics.record_job(task, *end, *elapsed);
                }
                if let (Some(place), None) = (&place, &one) {
                    let clean = outcome.jobs.len().saturating_sub(outcome.conflicts);
                    self.settled(place, &task, share, clean, outcome.conflicts);
                    let next = batch::next_size(size, options.batch, outcome.claimed, outcome.cut, outcome.conflicts);
                    sizes.insert(task.clone(), next);
                }
                alone.extend(outcome.alone.iter().cloned());
            }
            match result {
                Ok(outcome) if outcome.retire_connection => {
                    tracing::debug!(worker = self.id, "replacing a connection that carried a cancel request");
                    if let Some(s) = session.take() {
                        crate::db::discard(s.conn);
                    }
                }
                Ok(outcome) if outcome.claimed > 0 || !alone.is_empty() => {
                    self.context.sweeping.worked();
                    // Jobs no notification announced (retries come due, a lost
                    // notification): the other workers may be asleep.
                    if std::mem::take(&mut polled) {
                        self.context.nudge.send_modify(|n| *n += 1);
                    }
                    idle = Duration::from_millis(10);
                }
                Ok(_) => {
                    quiet.rest(task, self.context.options.poll_interval);
                }
                Err(e) => {
                    tracing::warn!(worker = self.id, task = %task, "worker lost its database connection, reconnecting: {}", crate::db::error_chain(&e));
                    // A conflict that ended the whole batch (a serialization failure at
                    // COMMIT, a deadlock on the host's own statements) counts as one, and
                    // the next claim is smaller.
                    if one.is_none() {
                        sizes.insert(task.clone(), (size / 2).max(1));
                        if let Some(place) = &place {
                            self.settled(place, &task, share, 0, usize::from(transient::conflict_of_batch(&e)));
                        }
                    }
                    drop(place);
                    if let Some(s) = session.take() {
                        // Only a batch that recorded its claim has an orphan to mark
                        // (through a pooler, the session's last backend may serve
                        // another client's batch by now).
                        let Some(backend) = hold.backend().filter(|_| transient::of_batch(&e)) else {
                            hold.release();
                            crate::db::discard(s.conn);
                            continue;
                        };
                        // Before the backend ends, where the connection still lives: a
                        // sweep must not take its orphan for a crash.
                        self.context.recorder.interrupted(backend, &shutdown).await;
                        hold.release();
                        crate::db::discard(s.conn);
                        // The server's backends died with it: count the batch on its
                        // jobs before they are claimed again (else a job done meanwhile
                        // would keep no record of the interruption).
                        claims::sweep_once(&self.pool, self.context.options.budgets(), &self.context.sweeping, &shutdown).await;
                    }
                }
            }
        }
    }

    /// A batch's jobs, counted on its task's concurrency; a change is logged, exported,
    /// and (a raise) wakes the idle workers to use it.
    fn settled(&self, place: &share::Taken, task: &str, share: usize, clean: usize, conflicts: usize) {
        let Some((before, now)) = place.settle(clean, conflicts) else { return };
        self.metrics.set_concurrency(task, now);
        if now < before {
            tracing::info!(task = %task, workers = now, share, "concurrency lowered: the task's jobs conflict (deadlocks, serialization failures)");
        } else {
            tracing::info!(task = %task, workers = now, share, "concurrency raised: the task's jobs ran without conflict");
            self.context.nudge.send_modify(|n| *n += 1);
        }
    }

    async fn open(&self, task: &str, shutdown: &CancellationToken) -> Result<Session, String> {
        let conn = self.context.logins.get(task).await.map_err(|e| e.to_string())?;
        let backend = claims::Backend::of(&conn).await.map_err(|e| crate::db::error_chain(&e))?;
        let options = &self.context.options;
        claims::sweep_since(&self.pool, options.budgets(), &self.context.sweeping, Some(backend.started), shutdown).await;
        // Through a pooler this backend serves whoever comes next: each batch reads its own.
        let backend = match conn.pooled() {
            true => claims::Backend { pid: 0, started: DateTime::<Utc>::UNIX_EPOCH },
            false => backend,
        };
        Ok(Session { task: task.to_owned(), conn: Arc::new(conn), backend })
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

    /// The WIT slot of a job keyed under `start`, labelled with its `period` (as the
    /// job row names it: the period it was generated for, under whatever calendar).
    fn get(&mut self, plugin: &crate::plugin::Plugin, start: DateTime<Utc>, period: &str) -> Slot {
        // By digest and revision: a reloaded plugin, or an applied change, may bring
        // another schedule.
        let applied = plugin.applied();
        let key = (plugin.digest.clone(), applied.revision, start);
        if let Some(slot) = self.slots.get(&key).filter(|s| s.label == period) {
            return slot.clone();
        }
        if self.slots.len() >= Self::CAPACITY {
            self.slots.clear();
        }
        let slot = applied.wit_slot(&applied.slot_at(start), period);
        self.slots.insert(key, slot.clone());
        slot
    }
}

/// One transaction in a session of `task`'s login: claim, record the claim, run each
/// job under a savepoint, record its end, commit.
///
/// The host's own statements are pipelined: BEGIN + claim + the first SAVEPOINT in one
/// round trip per batch; after a job that succeeded, its session's reset and the next
/// SAVEPOINT go out unanswered, ahead of the next job's first statement ([`InFlight`]), so
/// a job costs the host no round trip of its own (the statements of the plugin are its
/// own); a failed job's ROLLBACK TO, its record and what follows take one; COMMIT ends the
/// batch. If any of them fails, the error is returned and the connection dropped; the
/// transaction never commits.
pub async fn run_batch(
    conn: &Arc<Conn>,
    backend: &mut claims::Backend,
    context: &Context,
    task: &str,
    claim: Claim<'_>,
    slots: &mut SlotCache,
    hold: &mut claims::Hold,
) -> Result<BatchOutcome, BatchError> {
    let options = &context.options;
    let mut outcome = BatchOutcome::default();
    // Prepared before the transaction: a job's error aborts it, and the statements that
    // record the error could not be parsed then.
    let ((claim_due, claim_one, unclaim, failed), interrupted) = futures_util::future::try_join(
        try_join4(Prepared::on(conn, CLAIM), Prepared::on(conn, CLAIM_ONE), Prepared::on(conn, UNCLAIM), Prepared::on(conn, MARK_FAILED)),
        Prepared::on(conn, transient::RECORD),
    )
    .await?;
    let statements = Statements { failed, interrupted, host: &context.host };
    // The jobs are marked done by the plugin loaded now, and run on it: a reload during
    // the batch takes effect with the next one.
    let registry = context.loaded.load_full();
    let plugin = registry.get(task).cloned();
    let digest = plugin.as_ref().map(|p| p.digest.clone()).unwrap_or_default();
    let floor = context.floor.current();
    let claimed = async {
        match claim {
            Claim::Due(size) => claim_due.rows(conn, &[&i32::try_from(size.min(options.batch)).unwrap_or(i32::MAX), &floor, &digest]).await,
            Claim::One(slot, key) => claim_one.rows(conn, &[&slot, &key, &digest]).await,
        }
    };
    // Through a transaction pooler the batch's backend is the one its transaction runs on.
    let who = async {
        match conn.pooled() {
            true => claims::Backend::of(conn).await.map(Some),
            false => Ok(None),
        }
    };
    let (_, rows, ran_on, _) = try_join4(conn.batch_execute("BEGIN"), claimed, who, conn.batch_execute("SAVEPOINT job")).await?;
    if let Some(ran_on) = ran_on {
        *backend = ran_on;
    }
    outcome.claimed = rows.len();
    let mut rows: Vec<Claimed> = rows.iter().map(Claimed::from).collect();
    // The session is the plugin's, and so is what it answers: a plugin that replaced the
    // host's prepared claim on its session must not get another task's job recorded.
    if let Some(other) = rows.iter().find(|r| r.task != task) {
        return Err(BatchError::ConnectionLost(format!("the claim in {task}'s session answered a job of task {:?}; the session is dropped", other.task)));
    }
    // In the claim's order (an UPDATE returns its rows in no particular order).
    rows.sort_by(|a, b| (a.run_after, a.slot, &a.key).cmp(&(b.run_after, b.slot, &b.key)));
    // A job a crash marked runs alone: in a batch of several it waits for its own.
    let (rows, alone): (Vec<Claimed>, Vec<Claimed>) = if rows.len() > 1 { rows.into_iter().partition(|r| r.crashes == 0) } else { (rows, Vec::new()) };
    // The claim marked them done: pending again, as they were, for their own claim.
    for row in &alone {
        unclaim.exec(conn, &[&row.slot, &row.key, &row.last_error, &row.digest]).await?;
    }
    outcome.alone = alone.into_iter().map(|r| (r.task, r.slot, r.key)).collect();
    // A job a crash marked runs alone across all hosts too: a server crash while it runs
    // is then its own (sweep_claims.sql). Another one running, it waits a second.
    if let [row] = rows.as_slice() {
        if row.crashes > 0 && row.crashes < options.poison_after {
            let gate = Prepared::on(conn, ALONE).await?;
            let open: bool = gate.rows(conn, &[&row.slot, &row.key, &row.last_error, &row.digest]).await?.first().is_some_and(|r| r.get(0));
            if !open {
                conn.batch_execute(&COMMIT).await?;
                outcome.claimed = 0;
                return Ok(outcome);
            }
        }
    }
    let Some(plugin) = plugin.filter(|_| !rows.is_empty()) else {
        // Nothing to run, or the plugin went away between the choice and the claim:
        // pending again, as they were, for a host that has it. No plugin ran in this
        // transaction, so the session has nothing to clean: an idle host's poll is four
        // statements, not ten.
        put_back(conn, &unclaim, &rows, false).await?;
        outcome.claimed = 0;
        return Ok(outcome);
    };
    let held = |rows: &[Claimed]| rows.iter().map(|r| claims::Held { task: r.task.clone(), slot: r.slot, key: r.key.clone(), attempts: r.attempts }).collect();
    hold.hold(*backend).await;
    if let Err(e) = context.recorder.record(*backend, held(&rows)).await {
        return Err(BatchError::ConnectionLost(e.to_string()));
    }
    // Invariant at the top of the loop: a savepoint "job" is open and unused (or on its
    // way, in `sent`).
    let started = std::time::Instant::now();
    let mut sent: Option<InFlight> = None;
    for (i, row) in rows.iter().enumerate() {
        // Long enough, or a job's deadline sent a cancel on this connection (which may
        // land late, on the next job's statement: the connection is replaced after the
        // batch): the jobs not started go back pending for the next claim, so the
        // transaction (its locks, VACUUM's horizon) stays short.
        if i > 0 && (started.elapsed() >= options.batch_time || outcome.retire_connection) {
            InFlight::answer(sent.take()).await?;
            // The claim on record shrinks to the jobs that ran first: the sweep must not
            // take the ones put back for jobs this backend was running when it ended.
            if let Err(e) = context.recorder.record(*backend, held(&rows[..i])).await {
                return Err(BatchError::ConnectionLost(e.to_string()));
            }
            put_back(conn, &unclaim, &rows[i..], true).await?;
            outcome.claimed = i;
            outcome.cut = true;
            break;
        }
        let follow = if i + 1 == rows.len() { Follow::Commit } else { Follow::Savepoint };
        let job = Job {
            task: row.task.clone(),
            slot: slots.get(&plugin, row.slot, &row.period),
            key: row.key.clone(),
            attempt: u32::try_from(row.attempts).unwrap_or(0) + 1,
            payload: row.payload.clone(),
        };
        let span = tracing::info_span!("job", task = %row.task, slot = %job.slot.label, key = %crate::text::printable(&row.key), attempt = job.attempt);
        let run = if row.crashes >= options.poison_after {
            InFlight::answer(sent.take()).await?;
            poisoned(conn, &statements, &plugin, row, follow).instrument(span).await?
        } else {
            let (run, next) = run_job(conn, &statements, &plugin, &job, (row.slot, row.transients), options, (sent.take(), follow)).instrument(span).await?;
            sent = next;
            run
        };
        outcome.retire_connection |= run.cancelled;
        outcome.conflicts += usize::from(run.conflict);
        outcome.jobs.push((row.task.clone(), run.end, run.elapsed));
    }
    Ok(outcome)
}

/// Claimed jobs a batch does not run: pending again, exactly as they were, then COMMIT
/// (the open savepoint commits with it), and the session cleaned if a plugin ran in it.
async fn put_back(conn: &Arc<Conn>, unclaim: &Prepared, rows: &[Claimed], ran: bool) -> Result<(), BatchError> {
    // Sent together, answered together: one round trip.
    let params: Vec<[&dyn crate::db::Param; 4]> = rows.iter().map(|r| [&r.slot as &dyn crate::db::Param, &r.key, &r.last_error, &r.digest]).collect();
    futures_util::future::try_join_all(params.iter().map(|p| unclaim.exec(conn, p))).await?;
    conn.batch_execute(if ran { &COMMIT } else { "COMMIT" }).await?;
    if !rows.is_empty() {
        tracing::debug!(jobs = rows.len(), "jobs put back for the next claim");
    }
    Ok(())
}

/// Run one claimed job in the open savepoint (the one `before` is still answering, if
/// any) and send `follow` (the next SAVEPOINT, or COMMIT): its done mark is the claim's.
/// A failure is recorded in the same round trip. The next savepoint is returned unanswered.
async fn run_job(
    conn: &Arc<Conn>,
    statements: &Statements<'_>,
    plugin: &crate::plugin::Plugin,
    job: &Job,
    (slot, transients): (DateTime<Utc>, i32),
    options: &Options,
    (before, follow): (Option<InFlight>, Follow),
) -> Result<(JobRun, Option<InFlight>), BatchError> {
    let key = &job.key;
    let started = std::time::Instant::now();
    // The savepoint's answer is read while the plugin runs: left unread, its chunks fill
    // the connection's response channel and stop it reading the plugin's answers too.
    let (called, before) = futures_util::join!(plugin.run(conn, job), InFlight::answer(before));
    let elapsed = started.elapsed();
    let cancelled = called.ending.cancel_sent;
    before?;
    match called.result {
        Ok(()) => {
            // The savepoint is not released: the next one nests in it, and COMMIT ends
            // them all (a released subtransaction stays in the backend's subtransaction
            // cache until then anyway).
            let sql = match called.ending.used {
                true => follow.after_call(),
                false => follow.sql(),
            };
            tracing::debug!(?elapsed, "job done");
            let done = JobRun { end: JobEnd::Done, elapsed, cancelled, conflict: false };
            match follow {
                Follow::Savepoint => Ok((done, Some(InFlight::send(conn, sql).await))),
                Follow::Commit => {
                    conn.batch_execute(sql).await?;
                    Ok((done, None))
                }
            }
        }
        Err(CallError::ConnectionLost(why)) if transient::of_call(&called.ending, None) => Err(BatchError::Dropped(why)),
        Err(CallError::ConnectionLost(why)) => Err(BatchError::ConnectionLost(why)),
        Err(e) => {
            let transient = transient::of_call(&called.ending, Some(&e));
            let (give_up, delay) = match transient {
                true => transient::next(transients, options.transient_retries),
                false => {
                    let give_up = !e.retryable() || job.attempt >= plugin.spec.max_attempts;
                    (give_up, crate::backoff::delay(options.retry_base, options.retry_max, job.attempt))
                }
            };
            let message = crate::text::clip(e.to_string(), crate::text::MAX_STORED);
            let failure = Failure { message: &message, give_up, delay, digest: &plugin.digest, cancelled, transient };
            record_failure(conn, statements, (slot, key), failure, follow).await?;
            if give_up {
                tracing::warn!(error = %crate::text::printable(&message), "job failed for good");
            } else if transient {
                tracing::info!(error = %crate::text::printable(&message), retry_in = ?delay, "job interrupted by a transient error; not counted as an attempt");
            } else {
                tracing::info!(error = %crate::text::printable(&message), retry_in = ?delay, "job attempt failed");
            }
            let end = if give_up { JobEnd::Failed } else { JobEnd::Retried };
            Ok((JobRun { end, elapsed, cancelled, conflict: transient && transient::conflict_of_call(&called.ending) }, None))
        }
    }
}
