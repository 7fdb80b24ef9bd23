//! Poison jobs: what a batch holds is committed before it runs, so a host that dies
//! mid-job (a plugin or a statement that crashes it, a kill, a lost connection) leaves a
//! trace; the sweep turns such traces into crashes and attempts on the jobs
//! (`sweep_claims.sql`), and the executor fails a job that crashed hosts too often
//! instead of handing it to the next one (`migrations/V5__claims.sql` says why this
//! shape).
//!
//! The record is written by one task per host on a connection of its own, for all
//! workers at once (their requests are sent together and committed with
//! `synchronous_commit = off`: a host that dies does not take the server's WAL buffer
//! with it), so a batch waits one round trip for it. A server that crashes does take
//! it: a claim committed in the WAL writer's last 200 ms is lost with the crash. The
//! host lives on, though, and knows what its batch held: it writes the claim again,
//! with the server run it was made on, as soon as the server is back
//! ([`Recorder::interrupted`]). (Flushing every claim instead cost ~15 % of throughput in
//! `almanac bench`, at batch 1 and 32.)
use chrono::{DateTime, Utc};
use deadpool_postgres::{Object, Pool};
use futures_util::future::try_join_all;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::db::Sql;

const RECORD_CLAIM: &str = include_str!("record_claim.sql");
const SWEEP_CLAIMS: &str = include_str!("sweep_claims.sql");
const INTERRUPTED: &str = include_str!("interrupted_claim.sql");
const RECORD_AGAIN: &str = include_str!("record_claim_again.sql");
pub const WHO: &str = "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()";

/// A server connection, as pg_stat_activity names it: a backend's pid is reused, its
/// start time with it is not. Through a transaction pooler a client has no backend of
/// its own: a batch's is the one its transaction runs on ([`WHO`] read inside it), which
/// the pooler closes when the client goes away mid-transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    pub pid: i32,
    pub started: DateTime<Utc>,
}

impl Backend {
    /// The backend `conn` is connected to.
    pub async fn of(conn: &Object) -> Result<Backend, tokio_postgres::Error> {
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

/// What a worker's batch holds, as its claim row says: the backend running it, and,
/// once recorded, the jobs and the run of the server the claim was made on.
#[derive(Debug, Clone)]
pub struct Holding {
    pub backend: Backend,
    pub jobs: Vec<Held>,
    pub incarnation: Option<String>,
}

impl Holding {
    pub fn new(backend: Backend) -> Holding {
        Holding { backend, jobs: Vec::new(), incarnation: None }
    }
}

struct Request {
    backend: Backend,
    jobs: Vec<Held>,
    done: oneshot::Sender<Result<String, String>>,
}

/// The handle workers record their batches through.
#[derive(Clone)]
pub struct Recorder {
    requests: mpsc::UnboundedSender<Request>,
    pool: Pool,
    host: String,
}

/// Why a batch's claim could not be recorded: the batch must not run.
#[derive(Debug, thiserror::Error)]
#[error("could not record the claimed batch: {0}")]
pub struct RecordError(String);

impl Recorder {
    /// Start the recording task on `pool`; it ends with `shutdown`.
    pub fn start(pool: Pool, host: String, shutdown: CancellationToken) -> Recorder {
        let (requests, rx) = mpsc::unbounded_channel();
        tokio::spawn(record_loop(pool.clone(), host.clone(), rx, shutdown));
        Recorder { requests, pool, host }
    }

    /// Commit that `holding.backend` holds `jobs` from now on; `holding` keeps them.
    pub async fn record(&self, holding: &mut Holding, jobs: Vec<Held>) -> Result<(), RecordError> {
        let (done, answer) = oneshot::channel();
        let request = Request { backend: holding.backend, jobs: jobs.clone(), done };
        self.requests.send(request).map_err(|_| RecordError("the host is shutting down".into()))?;
        let incarnation = answer.await.map_err(|_| RecordError("the host is shutting down".into()))?.map_err(RecordError)?;
        holding.jobs = jobs;
        holding.incarnation = Some(incarnation);
        Ok(())
    }

    /// Say that the database dropped `holding`'s backend under its batch, the host living
    /// on: its orphan is an interruption, or, if the server crashed, what the sweep makes
    /// of a crash. The claim row is written again if the crash took it (it was committed
    /// without waiting for its WAL). Best effort: a sweep that reached the orphan first
    /// counted it already.
    pub async fn interrupted(&self, holding: &Holding) {
        let marked = async {
            let conn = self.pool.get().await.map_err(|e| e.to_string())?;
            let b = &holding.backend;
            let result = match &holding.incarnation {
                Some(incarnation) if !holding.jobs.is_empty() => {
                    let tasks: Vec<&str> = holding.jobs.iter().map(|j| j.task.as_str()).collect();
                    let slots: Vec<DateTime<Utc>> = holding.jobs.iter().map(|j| j.slot).collect();
                    let keys: Vec<&str> = holding.jobs.iter().map(|j| j.key.as_str()).collect();
                    let attempts: Vec<i32> = holding.jobs.iter().map(|j| j.attempts).collect();
                    conn.exec(RECORD_AGAIN, &[&b.pid, &b.started, &self.host, &tasks, &slots, &keys, &attempts, incarnation]).await
                }
                _ => conn.exec(INTERRUPTED, &[&b.pid, &b.started]).await,
            };
            result.map_err(|e| crate::db::error_chain(&e))
        };
        if let Err(e) = marked.await {
            tracing::debug!("could not mark an interrupted claim: {e}");
        }
    }
}

async fn record_loop(pool: Pool, host: String, mut rx: mpsc::UnboundedReceiver<Request>, shutdown: CancellationToken) {
    let mut conn: Option<Object> = None;
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
            Ok(incarnations) => batch.into_iter().zip(incarnations).for_each(|(r, i)| drop(r.done.send(Ok(i)))),
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
async fn open(pool: &Pool, shutdown: &CancellationToken) -> Option<Object> {
    crate::db::connect(pool, shutdown).await.ok()
}

/// Every request of `batch` in one transaction, sent together.
/// Each request's answer is the run of the server its claim was made on.
async fn write(conn: &Object, host: &str, batch: &[Request]) -> Result<Vec<String>, tokio_postgres::Error> {
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
    let params: Vec<[&dyn crate::db::Param; 7]> =
        rows.iter().map(|(b, tasks, slots, keys, attempts)| [&b.pid as _, &b.started as _, &host as _, tasks as _, slots as _, keys as _, attempts as _]).collect();
    let inserts = params.iter().map(|p| statement.rows(conn, p));
    let (begin, inserted, commit) = futures_util::join!(
        conn.batch_execute("BEGIN; SET LOCAL synchronous_commit = off"),
        try_join_all(inserts),
        conn.batch_execute("COMMIT")
    );
    begin?;
    let inserted = match inserted {
        Ok(rows) => rows,
        Err(e) => {
            let _ = conn.batch_execute("ROLLBACK").await;
            return Err(e);
        }
    };
    commit?;
    Ok(inserted.iter().map(|rows| rows.first().map(|r| r.get(0)).unwrap_or_default()).collect())
}

/// What one sweep found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
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
}

/// Take every orphaned claim and count what it says on the jobs.
/// `budget`: interruptions a job may have before it fails (`Options::transient_retries`).
///
/// A job an orphan lists that another batch holds now is waited for, a second at most
/// (`lock_timeout`): that batch may itself wait for its claim to be recorded, and the
/// record for an orphan this sweep is taking (through a pooler a server connection
/// serves many clients), so waiting longer could close a circle no server sees. The
/// sweep then fails whole, and the next one takes the orphans.
pub async fn sweep(conn: &(impl tokio_postgres::GenericClient + Sql), budget: i32) -> Result<Swept, tokio_postgres::Error> {
    let params: [&dyn crate::db::Param; 1] = [&budget];
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
    Ok(Swept { orphans: row.get(0), crashed: row.get(1), marked: row.get(2), interrupted: row.get(3), began: row.get(4) })
}

/// One sweep at a time per host, and when the last one began (by the server's clock).
///
/// One at a time: a sweep waits for a job another batch holds, on a pooled connection,
/// and that batch waits for its claim to be recorded on a pooled connection too; after a
/// failover every worker swept at once, and the sweeps held the whole pool, stalling
/// hosts for the pool's wait timeout (a minute).
pub type SweepGate = std::sync::Arc<tokio::sync::Mutex<Option<DateTime<Utc>>>>;

/// Sweep once, saying what was found.
pub async fn sweep_once(pool: &Pool, budget: i32, gate: &SweepGate, shutdown: &CancellationToken) {
    sweep_since(pool, budget, gate, None, shutdown).await
}

/// Sweep unless a sweep began after `since` (a backend's start). A worker on a backend
/// younger than the last sweep sweeps before it claims: after a server crash every
/// backend is new, and a job the crash orphaned must be marked before anyone claims it
/// again, or a job that kills the server runs again as if nothing happened.
pub async fn sweep_since(pool: &Pool, budget: i32, gate: &SweepGate, since: Option<DateTime<Utc>>, shutdown: &CancellationToken) {
    let mut last = gate.lock().await;
    if since.is_some_and(|since| last.is_some_and(|began| began > since)) {
        return;
    }
    // A pooled connection from before a server restart may only now turn out dead: the
    // next one is fresh. A sweep that gave up here would let the orphans' jobs be
    // claimed and done before any sweep counted them.
    let mut tries = 0;
    let swept = loop {
        let Ok(conn) = crate::db::connect(pool, shutdown).await else { return };
        match sweep(&**conn, budget).await {
            Err(e) if e.as_db_error().is_none() && tries < 3 => {
                tries += 1;
                drop(Object::take(conn));
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

/// Sweep every `every` until `shutdown` (the executor sweeps once itself before its
/// workers claim anything, so a host restarting after a crash counts it first).
pub async fn sweep_loop(pool: Pool, every: std::time::Duration, budget: i32, gate: SweepGate, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.cancelled() => return,
        }
        sweep_once(&pool, budget, &gate, &shutdown).await;
    }
}
