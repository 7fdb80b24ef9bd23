//! `almanac bench --history N`: the executor, `status` and the dashboard's data on an
//! empty history and again with N done jobs spread over a year of daily slots plus a
//! backlog of pending jobs not yet due, in one run on one database; then the time to
//! prune one month, the sizes before and after, and the dead tuples a 200,000-job run
//! leaves behind (and what autovacuum leaves of them).
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use chrono::{DateTime, Datelike, Utc};
use serde::Serialize;

use super::harness::{claim_latency, fresh_database, run_almanac, seed_accounts, HistoryOptions, Options, TASK};
use crate::cluster::Cluster;
use crate::{executor, host};

const FILL: &str = include_str!("history_fill.sql");
const AHEAD: &str = include_str!("history_ahead.sql");
const DUE: &str = include_str!("history_due.sql");
const VERIFY: &str = include_str!("history_verify.sql");
const SIZES: &str = include_str!("history_sizes.sql");

/// One side of the comparison: on an empty history, or on the full one.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// Jobs per second at --batch 1 and at --batch 32.
    pub batch1_jobs_per_second: f64,
    pub batch32_jobs_per_second: f64,
    pub claim_p50_ms: f64,
    pub claim_p99_ms: f64,
    pub status_p50_ms: f64,
    pub status_max_ms: f64,
    pub overview_p50_ms: f64,
    pub overview_max_ms: f64,
    /// The console's calendar of the task's last full month (`/api/calendar`).
    pub calendar_p50_ms: f64,
    pub calendar_max_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HistoryReport {
    pub done: i64,
    pub pending_ahead: i64,
    pub fill_seconds: f64,
    pub empty: Side,
    pub full: Side,
    pub prune_seconds: f64,
    pub pruned_done: i64,
    pub bytes_before_prune: i64,
    pub bytes_after_prune: i64,
    pub churn_jobs: i64,
    pub dead_tuples_after_churn: i64,
    /// Dead tuples once autovacuum has visited (None: it did not within the wait).
    pub dead_tuples_after_autovacuum: Option<i64>,
    pub autovacuum_wait_seconds: f64,
}

pub async fn measure(cluster: &Cluster, options: &Options, host_options: &host::Options, history: &HistoryOptions) -> anyhow::Result<HistoryReport> {
    let done = history.done;
    let url = fresh_database(cluster, "almanac_bench_history").await?;
    seed_accounts(&url, options.accounts).await?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let host = host::Host::start(&url, host_options.clone(), &shutdown).await?;
    let admin = host.pool.get().await?;
    // No scheduler runs here: the months the history spans are made as a host would.
    let now = crate::db::server_now(&admin).await?;
    crate::history::ensure(&admin, now - chrono::Duration::days(366), now + chrono::Duration::days(31)).await?;
    let pending_ahead = (done / 10).max(1);

    // One unmeasured run first, as the main table's floor run is before Almanac's: a new
    // database's first jobs pay for its cold caches.
    let mut run = 1;
    throughput(&host, &admin, options, 32, run).await?;
    let empty = side(&host, &admin, options, &mut run).await?;

    let started = Instant::now();
    // The private cluster bounds a statement's temporary files at 1 GB (cluster/server.rs);
    // a fill of 10^7 jobs needs more, and this connection is the bench's own.
    admin.batch_execute("SET temp_file_limit = -1").await?;
    admin.execute(FILL, &[&done]).await?;
    admin.execute(AHEAD, &[&pending_ahead]).await?;
    admin.batch_execute("RESET temp_file_limit").await?;
    admin.batch_execute("VACUUM ANALYZE almanac.jobs").await?;
    let fill_seconds = started.elapsed().as_secs_f64();
    let full = side(&host, &admin, options, &mut run).await?;

    // Prune exactly the oldest month: the cut is the start of the month after it.
    let (bytes_before_prune, _, _) = sizes(&admin).await?;
    let oldest: DateTime<Utc> = admin.query_one("SELECT min(next) FROM almanac.job_partitions", &[]).await?.get(0);
    let older_than = (crate::db::server_now(&admin).await? - oldest).to_std()? - Duration::from_secs(60);
    admin.execute("UPDATE almanac.schedules SET horizon = interval '30 days'", &[]).await?;
    let started = Instant::now();
    let pruned = crate::history::prune(&admin, older_than).await?;
    let prune_seconds = started.elapsed().as_secs_f64();
    ensure!(pruned.jobs.dropped.len() == 1 && pruned.jobs.kept.is_empty() && pruned.jobs.busy.is_empty(), "prune of one month: {pruned:?}");
    let (bytes_after_prune, _, _) = sizes(&admin).await?;

    // Dead tuples: a run of `churn` jobs (accounts x slots) at --batch 32.
    let churn_slots = (history.churn / options.accounts).max(1);
    for _ in 0..churn_slots {
        run += 1;
        throughput(&host, &admin, options, 32, run).await?;
    }
    let churn_ended = crate::db::server_now(&admin).await?;
    let (_, dead_tuples_after_churn, _) = sizes(&admin).await?;
    let waited = Instant::now();
    let mut dead_tuples_after_autovacuum = None;
    while waited.elapsed() < history.autovacuum_wait {
        let (_, dead, last) = sizes(&admin).await?;
        if last.is_some_and(|t| t > churn_ended) {
            dead_tuples_after_autovacuum = Some(dead);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(HistoryReport {
        done,
        pending_ahead,
        fill_seconds,
        empty,
        full,
        prune_seconds,
        pruned_done: pruned.jobs.dropped.iter().map(|(_, n)| n).sum(),
        bytes_before_prune,
        bytes_after_prune,
        churn_jobs: churn_slots * options.accounts,
        dead_tuples_after_churn,
        dead_tuples_after_autovacuum,
        autovacuum_wait_seconds: waited.elapsed().as_secs_f64(),
    })
}

async fn side(host: &host::Host, admin: &crate::db::Conn, options: &Options, run: &mut i64) -> anyhow::Result<Side> {
    *run += 1;
    let batch1 = throughput(host, admin, options, 1, *run).await?;
    *run += 1;
    let batch32 = throughput(host, admin, options, 32, *run).await?;
    // Claims with a slot's jobs due, in rolled-back transactions.
    *run += 1;
    admin.execute(DUE, &[&run_slot(admin, *run).await?]).await?;
    // In a session of the task's login, as the executor claims.
    let session = host.logins.get(TASK).await?;
    let (claim_p50_ms, claim_p99_ms) = claim_latency(&session, options.claim_samples).await?;
    drop(session);
    let registry = host.registry();
    let status = latencies(20, || async { crate::status::report(admin).await.map(drop) }).await?;
    let overview = latencies(20, || async { crate::dashboard::overview(admin, &registry).await.map(drop) }).await?;
    let today = Utc::now().date_naive();
    let last_month = (today - chrono::Duration::days(i64::from(today.day()))).format("%Y-%m").to_string();
    let calendar = latencies(20, || async {
        match crate::dashboard::calendar::month(admin, TASK, Some(&last_month)).await {
            Err(crate::dashboard::calendar::CalendarError::Db(e)) => Err(e),
            _ => Ok(()),
        }
    })
    .await?;
    // The claim samples' jobs are left to the next run's slot: done here, unmeasured.
    run_almanac(host, executor::Options { batch: 32, ..host_options_executor(options) }, admin).await?;
    Ok(Side {
        batch1_jobs_per_second: batch1,
        batch32_jobs_per_second: batch32,
        claim_p50_ms,
        claim_p99_ms,
        status_p50_ms: status.0,
        status_max_ms: status.1,
        overview_p50_ms: overview.0,
        overview_max_ms: overview.1,
        calendar_p50_ms: calendar.0,
        calendar_max_ms: calendar.1,
    })
}

fn host_options_executor(options: &Options) -> executor::Options {
    executor::Options { workers: options.workers, poll_interval: Duration::from_millis(50), ..Default::default() }
}

/// Run `n`'s slot: an instant of today no other run uses.
async fn run_slot(admin: &crate::db::Conn, n: i64) -> anyhow::Result<DateTime<Utc>> {
    Ok(admin.query_one("SELECT date_trunc('day', now(), 'UTC') + make_interval(secs => $1::bigint)", &[&n]).await?.get(0))
}

/// Every account's job for a fresh slot, run by the executor at `batch`; jobs per second
/// from the database's clock, checked against the ledger.
async fn throughput(host: &host::Host, admin: &crate::db::Conn, options: &Options, batch: usize, n: i64) -> anyhow::Result<f64> {
    let slot = run_slot(admin, n).await?;
    admin.execute(DUE, &[&slot]).await?;
    admin.batch_execute("VACUUM ANALYZE accounts").await?;
    let start: DateTime<Utc> = admin.query_one("SELECT clock_timestamp()", &[]).await?.get(0);
    run_almanac(host, executor::Options { batch, ..host_options_executor(options) }, admin).await?;
    let row = admin.query_one(VERIFY, &[&slot]).await?;
    let (points, done, ledger, end): (i64, i64, i64, DateTime<Utc>) = (row.get(0), row.get(1), row.get(2), row.get(3));
    let a = options.accounts;
    ensure!(points == 10 * a && done == a && ledger == a, "history run {n}: {points} points, {done} done, {ledger} ledger rows for {a} accounts");
    Ok(a as f64 / (end - start).as_seconds_f64())
}

/// (p50, max) milliseconds of `n` calls.
async fn latencies<F, Fut>(n: usize, call: F) -> anyhow::Result<(f64, f64)>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), tokio_postgres::Error>>,
{
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        call().await.context("status or overview")?;
        ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms[ms.len() / 2], ms[ms.len() - 1]))
}

async fn sizes(admin: &crate::db::Conn) -> anyhow::Result<(i64, i64, Option<DateTime<Utc>>)> {
    let row = admin.query_one(SIZES, &[]).await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}
