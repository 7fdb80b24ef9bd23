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
//! with it), so a batch waits one round trip for it.
use chrono::{DateTime, Utc};
use deadpool_postgres::{Object, Pool};
use futures_util::future::try_join_all;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::db::Sql;

const RECORD_CLAIM: &str = include_str!("record_claim.sql");
const SWEEP_CLAIMS: &str = include_str!("sweep_claims.sql");
/// Whether claims are kept. A claim names the server session running the job; through a
/// transaction pooler a client has no session of its own (its transactions land on
/// shared server connections, which outlive it), so a crash cannot be told from a claim
/// there, and a sweep keyed by a shared backend would wait on live jobs' locks. Through a
/// pooler, jobs that crash their host are retried without being counted as crashes.
fn tracked() -> bool {
    !crate::db::pooled()
}

const WHO: &str = "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()";

/// A server connection, as pg_stat_activity names it: a backend's pid is reused, its
/// start time with it is not.
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

struct Request {
    backend: Backend,
    jobs: Vec<Held>,
    done: oneshot::Sender<Result<(), String>>,
}

/// The handle workers record their batches through.
#[derive(Clone)]
pub struct Recorder {
    requests: mpsc::UnboundedSender<Request>,
}

/// Why a batch's claim could not be recorded: the batch must not run.
#[derive(Debug, thiserror::Error)]
#[error("could not record the claimed batch: {0}")]
pub struct RecordError(String);

impl Recorder {
    /// Start the recording task on `pool`; it ends with `shutdown`.
    pub fn start(pool: Pool, host: String, shutdown: CancellationToken) -> Recorder {
        let (requests, rx) = mpsc::unbounded_channel();
        tokio::spawn(record_loop(pool, host, rx, shutdown));
        Recorder { requests }
    }

    /// Commit that `backend` holds `jobs` from now on.
    pub async fn record(&self, backend: Backend, jobs: Vec<Held>) -> Result<(), RecordError> {
        if !tracked() {
            return Ok(());
        }
        let (done, answer) = oneshot::channel();
        self.requests.send(Request { backend, jobs, done }).map_err(|_| RecordError("the host is shutting down".into()))?;
        answer.await.map_err(|_| RecordError("the host is shutting down".into()))?.map_err(RecordError)
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
            conn = crate::db::connect(&pool, &shutdown).await.ok();
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

/// Every request of `batch` in one transaction, sent together.
async fn write(conn: &Object, host: &str, batch: &[Request]) -> Result<(), tokio_postgres::Error> {
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
    let (begin, inserted, commit) = futures_util::join!(
        conn.batch_execute("BEGIN; SET LOCAL synchronous_commit = off"),
        try_join_all(inserts),
        conn.batch_execute("COMMIT")
    );
    begin?;
    if let Err(e) = inserted {
        let _ = conn.batch_execute("ROLLBACK").await;
        return Err(e);
    }
    commit
}

/// What one sweep found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Orphaned claim rows taken.
    pub orphans: i64,
    /// Jobs that ended with their host while claimed alone: a crash and an attempt each.
    pub crashed: i64,
    /// Jobs of a larger batch that ended with their host: marked to run alone.
    pub marked: i64,
}

/// Take every orphaned claim and count what it says on the jobs.
pub async fn sweep(conn: &(impl tokio_postgres::GenericClient + Sql)) -> Result<Swept, tokio_postgres::Error> {
    let row = conn.one(SWEEP_CLAIMS, &[]).await?;
    Ok(Swept { orphans: row.get(0), crashed: row.get(1), marked: row.get(2) })
}

/// Sweep once, saying what was found.
pub async fn sweep_once(pool: &Pool, shutdown: &CancellationToken) {
    if !tracked() {
        return;
    }
    let Ok(conn) = crate::db::connect(pool, shutdown).await else { return };
    match sweep(&**conn).await {
        Ok(swept) if swept.crashed + swept.marked > 0 => tracing::warn!(
            crashed = swept.crashed,
            marked = swept.marked,
            "jobs ended with the host or connection running them: counted as crashes (a job claimed alone also as a failed attempt); \
             jobs of a larger batch run alone from now on"
        ),
        Ok(_) => {}
        Err(e) => tracing::debug!("claims sweep: {}", crate::db::error_chain(&e)),
    }
}

/// Sweep every `every` until `shutdown` (the executor sweeps once itself before its
/// workers claim anything, so a host restarting after a crash counts it first).
pub async fn sweep_loop(pool: Pool, every: std::time::Duration, shutdown: CancellationToken) {
    if !tracked() {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.cancelled() => return,
        }
        sweep_once(&pool, &shutdown).await;
    }
}
