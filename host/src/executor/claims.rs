//! Poison jobs: what a batch holds is committed before it runs, so a host that dies
//! mid-job (a plugin or a statement that crashes it, a kill, a lost connection) leaves a
//! trace; the sweep turns such traces into crashes and attempts on the jobs
//! (`sweep_claims.sql`), and the executor fails a job that crashed hosts too often
//! instead of handing it to the next one (`migrations/V5__claims.sql` says why this
//! shape).
//!
//! The record is written by one task per host on a connection of its own, for all
//! workers at once (their requests are sent together, one commit for all), so a batch
//! waits one round trip and one WAL flush for it. The flush is what lets a job that
//! crashes the database server be counted: crash recovery keeps only flushed WAL, a
//! plugin can kill its backend within the WAL writer's 200 ms, and the host that saw it
//! cannot write the claim again before other workers claim the job (tried: the job ran
//! again unmarked beside a suspect, which was then counted). The flush cost ~15 % of
//! `almanac bench`'s throughput at batch 1 and 32.
use std::collections::HashMap;

use crate::db::{Conn, Pool};
use chrono::{DateTime, Utc};
use futures_util::future::try_join_all;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::db::Sql;

const RECORD_CLAIM: &str = include_str!("record_claim.sql");
const SWEEP_CLAIMS: &str = include_str!("sweep_claims.sql");
const INTERRUPTED: &str = include_str!("interrupted_claim.sql");
pub const WHO: &str = "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()";

/// A server connection, as pg_stat_activity names it: a backend's pid is reused, its
/// start time with it is not. Through a transaction pooler a client has no backend of
/// its own: a batch's is the one its transaction runs on ([`WHO`] read inside it), which
/// the pooler closes when the client goes away mid-transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backend {
    pub pid: i32,
    pub started: DateTime<Utc>,
}

impl Backend {
    /// The backend `conn` is connected to.
    pub async fn of(conn: &Conn) -> Result<Backend, tokio_postgres::Error> {
        let row = conn.one(WHO, &[]).await?;
        Ok(Backend { pid: row.get(0), started: row.get(1) })
    }
}

/// One job of a batch, as claimed.
#[derive(Debug, Clone)]
pub struct Held {
    pub task: String,
    pub slot: DateTime<Utc>,
    pub key: String,
    pub attempts: i32,
}

struct Request {
    backend: Backend,
    jobs: Vec<Held>,
    done: oneshot::Sender<Result<(), String>>,
}

/// The handle workers record their batches through.
#[derive(Clone)]
pub struct Recorder {
    requests: mpsc::UnboundedSender<Request>,
    pool: Pool,
}

/// Why a batch's claim could not be recorded: the batch must not run.
#[derive(Debug, thiserror::Error)]
#[error("could not record the claimed batch: {0}")]
pub struct RecordError(String);

impl Recorder {
    /// Start the recording task on `pool`; it ends with `shutdown`.
    pub fn start(pool: Pool, host: String, shutdown: CancellationToken) -> Recorder {
        let (requests, rx) = mpsc::unbounded_channel();
        tokio::spawn(record_loop(pool.clone(), host, rx, shutdown));
        Recorder { requests, pool }
    }

    /// Commit that `backend` holds `jobs` from now on.
    pub async fn record(&self, backend: Backend, jobs: Vec<Held>) -> Result<(), RecordError> {
        let (done, answer) = oneshot::channel();
        self.requests.send(Request { backend, jobs, done }).map_err(|_| RecordError("the host is shutting down".into()))?;
        answer.await.map_err(|_| RecordError("the host is shutting down".into()))?.map_err(RecordError)
    }

    /// Say that the database dropped `backend` under its batch, the host living
    /// on: its orphan is an interruption, or, if the server crashed, what the sweep makes
    /// of a crash (its claim names the server run). Best effort: a sweep that reached the
    /// orphan first counted it already. (Never written again once gone: a sweep took it,
    /// and a second would count it twice.)
    pub async fn interrupted(&self, backend: Backend, shutdown: &CancellationToken) {
        // Until the server answers (through PgBouncer, statements fail for its
        // server_login_retry after the server went away), before this worker claims again.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            match self.mark_interrupted(backend).await {
                Ok(()) => return,
                Err(e) if tokio::time::Instant::now() >= deadline || shutdown.is_cancelled() => {
                    tracing::warn!("could not write an interrupted batch's claim again: {e}");
                    return;
                }
                Err(e) => tracing::debug!("could not mark an interrupted claim yet: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }

    async fn mark_interrupted(&self, b: Backend) -> Result<(), String> {
        let conn = self.pool.get().await.map_err(|e| e.to_string())?;
        conn.exec(INTERRUPTED, &[&b.pid, &b.started]).await.map(drop).map_err(|e| crate::db::error_chain(&e))
    }
}

async fn record_loop(pool: Pool, host: String, mut rx: mpsc::UnboundedReceiver<Request>, shutdown: CancellationToken) {
    let mut conn: Option<Conn> = None;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        if conn.is_none() {
            conn = open(&pool, &shutdown).await;
        }
        let Some(client) = &conn else {
            for request in batch {
                let _ = request.done.send(Err("the host is shutting down".into()));
            }
            return;
        };
        match write(client, &host, &batch).await {
            Ok(()) => batch.into_iter().for_each(|r| drop(r.done.send(Ok(())))),
            Err(e) => {
                let why = crate::db::error_chain(&e);
                tracing::warn!("could not record claimed batches: {why}");
                batch.into_iter().for_each(|r| drop(r.done.send(Err(why.clone()))));
                conn = None;
            }
        }
    }
}

/// A connection for the recorder; None when the host is shutting down.
async fn open(pool: &Pool, shutdown: &CancellationToken) -> Option<Conn> {
    crate::db::connect(pool, shutdown).await.ok()
}

/// Every request of `batch` in one transaction, sent together.
async fn write(conn: &Conn, host: &str, batch: &[Request]) -> Result<(), tokio_postgres::Error> {
    let statement = crate::db::Prepared::on(conn, RECORD_CLAIM).await?;
    let rows: Vec<_> = batch
        .iter()
        .map(|r| {
            let tasks: Vec<&str> = r.jobs.iter().map(|j| j.task.as_str()).collect();
            let slots: Vec<DateTime<Utc>> = r.jobs.iter().map(|j| j.slot).collect();
            let keys: Vec<&str> = r.jobs.iter().map(|j| j.key.as_str()).collect();
            let attempts: Vec<i32> = r.jobs.iter().map(|j| j.attempts).collect();
            (r.backend, tasks, slots, keys, attempts)
        })
        .collect();
    let params: Vec<[&dyn crate::db::Param; 7]> = rows
        .iter()
        .map(|(b, tasks, slots, keys, attempts)| [&b.pid as _, &b.started as _, &host as _, tasks as _, slots as _, keys as _, attempts as _])
        .collect();
    let inserts = params.iter().map(|p| statement.exec(conn, p));
    let (begin, inserted, commit) =
        futures_util::join!(conn.batch_execute("BEGIN; SET LOCAL synchronous_commit = local"), try_join_all(inserts), conn.batch_execute("COMMIT"));
    begin?;
    if let Err(e) = inserted {
        let _ = conn.batch_execute("ROLLBACK").await;
        return Err(e);
    }
    commit
}

/// What one sweep found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Orphaned claim rows taken.
    pub orphans: i64,
    /// Jobs that ended with their host, or with the database server, while running
    /// alone: a crash and an attempt each.
    pub crashed: i64,
    /// Other jobs that ended with their host or the database server: marked to run alone.
    pub marked: i64,
    /// Jobs the database went away under (a server restart, a failover, a dropped
    /// connection): counted on their own budget, never as crashes.
    pub interrupted: i64,
    /// When the sweep began, by the server's clock.
    pub began: DateTime<Utc>,
    /// Tasks this sweep held: charged with too many server crashes.
    pub held: Vec<String>,
}

/// What the sweep counts against: a job's interruptions, a task's server crashes.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// Interruptions a job may have before it fails (`Options::transient_retries`).
    pub transient: i32,
    /// Server crashes charged to a task within `poison_window` that hold it.
    pub poison_after: i32,
    pub poison_window: std::time::Duration,
}

/// Take every orphaned claim and count what it says on the jobs, and each server crash
/// on the tasks that were running (holding one charged too often).
///
/// A job an orphan lists that another batch holds now is waited for, a second at most
/// (`lock_timeout`): that batch may itself wait for its claim to be recorded, and the
/// record for an orphan this sweep is taking (through a pooler a server connection
/// serves many clients), so waiting longer could close a circle no server sees. The
/// sweep then fails whole, and the next one takes the orphans.
///
/// `running`: backends whose batch this host has not settled yet (their orphans wait:
/// [`Hold`]).
pub async fn sweep(conn: &(impl tokio_postgres::GenericClient + Sql), budgets: Budgets, running: &[Backend]) -> Result<Swept, tokio_postgres::Error> {
    let pids: Vec<i32> = running.iter().map(|b| b.pid).collect();
    let starts: Vec<DateTime<Utc>> = running.iter().map(|b| b.started).collect();
    let window = format!("{} seconds", budgets.poison_window.as_secs());
    let params: [&dyn crate::db::Param; 5] = [&budgets.transient, &pids, &starts, &budgets.poison_after, &window];
    let (begun, row, committed) =
        futures_util::join!(conn.batch_execute("BEGIN; SET LOCAL lock_timeout = '1s'"), conn.one(SWEEP_CLAIMS, &params), conn.batch_execute("COMMIT"));
    begun?;
    let row = match row {
        Ok(row) => row,
        Err(e) => {
            let _ = conn.batch_execute("ROLLBACK").await;
            return Err(e);
        }
    };
    committed?;
    let held: Option<Vec<String>> = row.get(5);
    Ok(Swept { orphans: row.get(0), crashed: row.get(1), marked: row.get(2), interrupted: row.get(3), began: row.get(4), held: held.unwrap_or_default() })
}

/// One sweep at a time per host, when the last one began (by the server's clock), and
/// the batches this host's sweeps leave alone.
///
/// One at a time: a sweep waits for a job another batch holds, on a pooled connection,
/// and that batch waits for its claim to be recorded on a pooled connection too; after a
/// failover every worker swept at once, and the sweeps held the whole pool, stalling
/// hosts for the pool's wait timeout (a minute).
#[derive(Default)]
pub struct SweepGate {
    last: tokio::sync::Mutex<Option<DateTime<Utc>>>,
    /// Backends with a batch this host has not settled, and how many hold each (through
    /// a pooler one server backend serves the next client as soon as a batch commits).
    running: std::sync::Mutex<HashMap<Backend, usize>>,
    /// When this host last claimed a job or saw one due ([`sweep_loop`]).
    worked: std::sync::Mutex<Option<std::time::Instant>>,
    /// Held exclusively by a sweep from before it reads `running` until it ends, and
    /// shared by [`Hold::hold`]: a batch held after the sweep read `running` is recorded
    /// only after the sweep, so the sweep cannot see its claim without its hold. (Read
    /// first and judged a few ms later on a loaded machine, the sweep took a batch whose
    /// connection was cut meanwhile for a crash: a second attempt; tests/e2e/reliability.rs,
    /// once in CI.)
    sweeping: tokio::sync::RwLock<()>,
}

impl SweepGate {
    /// This host claimed jobs, or saw jobs due that another may be running.
    pub fn worked(&self) {
        *self.worked.lock().expect("sweep gate") = Some(std::time::Instant::now());
    }

    fn worked_within(&self, within: std::time::Duration) -> bool {
        self.worked.lock().expect("sweep gate").is_some_and(|at| at.elapsed() < within)
    }

    fn running(&self) -> Vec<Backend> {
        self.running.lock().expect("sweep gate").keys().copied().collect()
    }
}

/// A worker's batch as this host's sweeps see it. A connection cut under a batch ends its
/// backend at once, before the worker hears of it and says the orphan is an interruption;
/// a sweep in between counted the cut as a crash and an attempt. So from [`Hold::hold`]
/// (its claim is about to be recorded) until [`Hold::release`] (it committed, or its
/// orphan was marked for what it is), this host's sweeps do not judge the orphan, unless
/// the server restarted since the claim (then the mark changes nothing:
/// `sweep_claims.sql`). Released when dropped too, so a worker that panics leaves its
/// orphan to be counted. (Another host's sweep may still judge it before the mark.)
pub struct Hold {
    gate: std::sync::Arc<SweepGate>,
    backend: Option<Backend>,
}

impl Hold {
    pub fn new(gate: std::sync::Arc<SweepGate>) -> Hold {
        Hold { gate, backend: None }
    }

    /// Hold `backend`'s batch: call before its claim is recorded (waits for a sweep in
    /// progress to end).
    pub async fn hold(&mut self, backend: Backend) {
        self.release();
        let _shared = self.gate.sweeping.read().await;
        *self.gate.running.lock().expect("sweep gate").entry(backend).or_default() += 1;
        self.backend = Some(backend);
    }

    /// The backend held, if the batch got as far as recording its claim.
    pub fn backend(&self) -> Option<Backend> {
        self.backend
    }

    pub fn release(&mut self) {
        let Some(backend) = self.backend.take() else { return };
        let mut running = self.gate.running.lock().expect("sweep gate");
        if let Some(n) = running.get_mut(&backend) {
            *n -= 1;
            if *n == 0 {
                running.remove(&backend);
            }
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
    }
}

/// Sweep once, saying what was found.
pub async fn sweep_once(pool: &Pool, budgets: Budgets, gate: &SweepGate, shutdown: &CancellationToken) {
    sweep_since(pool, budgets, gate, None, shutdown).await
}

/// Sweep unless a sweep began after `since` (a backend's start). A worker on a backend
/// younger than the last sweep sweeps before it claims: after a server crash every
/// backend is new, and a job the crash orphaned must be marked before anyone claims it
/// again, or a job that kills the server runs again as if nothing happened.
pub async fn sweep_since(pool: &Pool, budgets: Budgets, gate: &SweepGate, since: Option<DateTime<Utc>>, shutdown: &CancellationToken) {
    let mut last = gate.last.lock().await;
    if since.is_some_and(|since| last.is_some_and(|began| began > since)) {
        return;
    }
    // A pooled connection from before a server restart may only now turn out dead: the
    // next one is fresh. A sweep that gave up here would let the orphans' jobs be
    // claimed and done before any sweep counted them.
    let mut tries = 0;
    let swept = loop {
        let Ok(conn) = crate::db::connect(pool, shutdown).await else { return };
        let _exclusive = gate.sweeping.write().await;
        match sweep(&**conn, budgets, &gate.running()).await {
            Err(e) if e.as_db_error().is_none() && tries < 3 => {
                tries += 1;
                conn.close();
            }
            result => break result,
        }
    };
    match swept {
        Ok(swept) => {
            *last = Some(swept.began);
            if swept.crashed + swept.marked > 0 {
                tracing::warn!(
                    crashed = swept.crashed,
                    marked = swept.marked,
                    "jobs ended with the host or the database server running them: a job that ran alone is counted as a crash and a failed attempt; \
                     the others run alone from now on"
                );
            }
            for task in &swept.held {
                tracing::error!(
                    %task, crashes = budgets.poison_after, window = ?budgets.poison_window,
                    "task HELD: the database server crashed this many times while its jobs ran; no job of it starts until `almanac release {task}`"
                );
            }
            if swept.interrupted > 0 {
                tracing::info!(
                    jobs = swept.interrupted,
                    "jobs the database went away under (a restart, a failover, a dropped connection): pending again, not counted as attempts"
                );
            }
        }
        Err(e) => tracing::debug!("claims sweep: {}", crate::db::error_chain(&e)),
    }
}

/// An idle host sweeps this often: an orphan's jobs matter once they are pending, and
/// then a host sees them due ([`SweepGate::worked`]) and sweeps every `every` again.
const IDLE_SWEEP: std::time::Duration = std::time::Duration::from_secs(30);

/// Sweep every `every` while this host works, every [`IDLE_SWEEP`] while it is idle,
/// until `shutdown` (the executor sweeps once itself before its workers claim anything,
/// so a host restarting after a crash counts it first).
pub async fn sweep_loop(pool: Pool, every: std::time::Duration, budgets: Budgets, gate: std::sync::Arc<SweepGate>, shutdown: CancellationToken) {
    let mut swept = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.cancelled() => return,
        }
        if gate.worked_within(IDLE_SWEEP) || swept.elapsed() >= IDLE_SWEEP {
            sweep_once(&pool, budgets, &gate, &shutdown).await;
            swept = std::time::Instant::now();
        }
    }
}
