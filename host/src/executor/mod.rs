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
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::login::Logins;
use crate::metrics::Metrics;
use crate::plugin::{Loaded, Served};

mod batch;
pub mod claims;
mod context;
mod idle;
pub mod operate;
mod record;
mod run;
pub mod share;
pub mod transient;

pub use batch::BatchError;
pub use context::{Context, Options};
pub use run::{run_batch, BatchOutcome, Claim, SlotCache};

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
        let mut served = Served::now(&self.context.loaded);
        let mut tasks = served.registry().tasks();
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
            // Claim for the tasks served now (recomputed only when that changed).
            if served.changed(&self.context.loaded) {
                served = Served::now(&self.context.loaded);
                tasks = served.registry().tasks();
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
