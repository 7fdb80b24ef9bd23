//! What every measurement shares: the options, the cluster's settings, a fresh database
//! and its reset, a timed run and the check of its result, and the two contenders (the
//! seed's SQL as a plain loop, and the real executor).
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::ensure;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::cpu;
use crate::bindings::almanac::plugin::types::{Job, Slot};
use crate::cluster::{Cluster, Settings};
use crate::{executor, host, plugin};

const FLOOR_CLAIM: &str = include_str!("floor_claim.sql");
const FLOOR_DONE: &str = include_str!("floor_done.sql");
const LEDGER: &str = include_str!("ledger.sql");
const POINTS: &str = include_str!("points.sql");
const RESET: &str = include_str!("reset.sql");
pub(super) const TASK: &str = "daily-points";

/// What to measure, and how much.
#[derive(Debug, Clone)]
pub struct Options {
    /// The daily_points.wasm component.
    pub plugin: PathBuf,
    /// Where the private cluster lives (created if needed).
    pub data_dir: PathBuf,
    /// Accounts (= jobs) per throughput run. Defaults to 20,000.
    pub accounts: i64,
    pub workers: usize,
    pub batches: Vec<usize>,
    /// Keys of the generated slot, and the depth of the claim test. Defaults to 1,000,000.
    pub generate: i64,
    pub claim_samples: usize,
    pub overhead_calls: usize,
    /// Also measure the executor over each way of connecting.
    pub connections: bool,
    /// Also measure the SQL enqueue API: (keys in one enqueue_many, single calls).
    pub enqueue: Option<(usize, usize)>,
    /// Also measure on a history of this many done jobs (beside an empty one).
    pub history: Option<HistoryOptions>,
    /// Also measure with these numbers of hosts on the database (at the largest batch).
    pub hosts: Vec<usize>,
    /// Also measure these components of daily-points (other languages) beside `plugin`.
    pub languages: Vec<PathBuf>,
    /// Measure idle hosts and lone jobs ([`super::idle`]).
    pub idle: IdleOptions,
    /// Also measure a deadlock storm against serial execution ([`super::contention`]).
    pub contention: Option<ContentionOptions>,
    /// Also measure the largest batch under this many clients loading the console's pages
    /// ([`super::pages`]).
    pub page_loads: Option<usize>,
}

/// The deadlock storm: fixture-crosslock's component, its jobs and their pause.
#[derive(Debug, Clone)]
pub struct ContentionOptions {
    pub plugin: PathBuf,
    pub jobs: i64,
    /// Seconds between a job's two locks.
    pub pause: f64,
}

/// How the idle hosts and the lone jobs are measured.
#[derive(Debug, Clone)]
pub struct IdleOptions {
    /// The numbers of hosts watched idle (1 and 4).
    pub hosts: Vec<usize>,
    /// How long each is watched (a minute).
    pub window: Duration,
    /// Lone jobs timed (200).
    pub lone: usize,
}

/// How big a history to measure on.
#[derive(Debug, Clone)]
pub struct HistoryOptions {
    /// Done jobs spread over a year of daily slots (a tenth as many wait, not yet due).
    pub done: i64,
    /// Jobs of the run whose dead tuples are counted (200,000).
    pub churn: i64,
    /// How long to wait for autovacuum to visit almanac.jobs after that run.
    pub autovacuum_wait: Duration,
}

/// The cluster's settings, printed with the figures.
pub fn settings() -> Settings {
    let mut s = Settings::default();
    for (k, v) in [("fsync", "on"), ("synchronous_commit", "on"), ("shared_buffers", "'256MB'"), ("max_wal_size", "'2GB'")] {
        s.extra.push((k.into(), v.into()));
    }
    s
}

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub batch: usize,
    pub jobs: i64,
    pub seconds: f64,
    pub jobs_per_second: f64,
    pub host_cpu_seconds: Option<f64>,
    pub postgres_cpu_seconds: Option<f64>,
}

pub(super) async fn fresh_database(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    let (admin, connection) = tokio_postgres::connect(&cluster.url("postgres"), tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await?;
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await?;
    Ok(cluster.url(name))
}

pub(super) async fn reset(admin: &tokio_postgres::Client) -> anyhow::Result<()> {
    admin.batch_execute(RESET).await?;
    admin.batch_execute("VACUUM ANALYZE accounts").await?;
    admin.batch_execute("VACUUM ANALYZE almanac.jobs").await?;
    admin.batch_execute("CHECKPOINT").await?;
    Ok(())
}

/// Run `work`; the elapsed time is from the database's clock at the start to the last
/// job's completion, the CPU figures are deltas over the same work.
pub(super) async fn timed<F, Fut>(admin: &tokio_postgres::Client, cluster: &Cluster, work: F) -> anyhow::Result<(f64, (f64, f64))>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let start: DateTime<Utc> = admin.query_one("SELECT clock_timestamp()", &[]).await?.get(0);
    let (host0, pg0) = (cpu::this_process(), cpu::cluster(&cluster.data_dir).unwrap_or(0.0));
    work().await?;
    let (host1, pg1) = (cpu::this_process(), cpu::cluster(&cluster.data_dir).unwrap_or(0.0));
    let end: DateTime<Utc> = admin.query_one("SELECT max(completed_at) FROM almanac.jobs", &[]).await?.get(0);
    Ok(((end - start).as_seconds_f64(), (host1 - host0, pg1 - pg0)))
}

pub(super) async fn verified(admin: &tokio_postgres::Client, batch: usize, accounts: i64, seconds: f64, cpu: Option<(f64, f64)>) -> anyhow::Result<Run> {
    let row = admin
        .query_one(
            "SELECT (SELECT sum(points)::bigint FROM accounts), (SELECT count(*) FROM almanac.jobs WHERE status = 'done'),
                    (SELECT count(*) FROM points_ledger)",
            &[],
        )
        .await?;
    let (points, done, ledger): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    ensure!(
        points == 10 * accounts && done == accounts && ledger == accounts,
        "batch {batch}: wrong result: {points} points, {done} done, {ledger} ledger rows for {accounts} accounts"
    );
    Ok(Run {
        batch,
        jobs: accounts,
        seconds,
        jobs_per_second: accounts as f64 / seconds,
        host_cpu_seconds: cpu.map(|c| c.0),
        postgres_cpu_seconds: cpu.map(|c| c.1),
    })
}

/// The physical reference: the job's SQL and nothing else, one statement at a time.
pub(super) async fn run_floor(pool: &crate::db::Pool, workers: usize, batch: usize, digest: &str) -> anyhow::Result<()> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let conn = pool.get().await?;
        let digest = digest.to_owned();
        set.spawn(async move {
            let tasks = vec![TASK.to_owned()];
            let (claim, ledger, points, done) =
                (conn.prepare(FLOOR_CLAIM).await?, conn.prepare(LEDGER).await?, conn.prepare(POINTS).await?, conn.prepare(FLOOR_DONE).await?);
            loop {
                conn.batch_execute("BEGIN").await?;
                let rows = conn.query(&claim, &[&tasks, &(batch as i64)]).await?;
                if rows.is_empty() {
                    conn.batch_execute("COMMIT").await?;
                    return Ok::<_, tokio_postgres::Error>(());
                }
                for row in rows {
                    let (task, slot, key, period): (String, DateTime<Utc>, String, String) = (row.get(0), row.get(1), row.get(2), row.get(7));
                    let account: i64 = key.parse().unwrap_or_default();
                    if batch > 1 {
                        conn.batch_execute("SAVEPOINT job").await?;
                    }
                    if conn.execute(&ledger, &[&task, &period, &account, &10i64, &slot]).await? == 1 {
                        conn.execute(&points, &[&account, &10i64]).await?;
                    }
                    if batch > 1 {
                        conn.batch_execute("RELEASE SAVEPOINT job").await?;
                    }
                    conn.execute(&done, &[&task, &slot, &key, &digest]).await?;
                }
                conn.batch_execute("COMMIT").await?;
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}

pub(super) async fn run_almanac(host: &host::Host, options: executor::Options, admin: &tokio_postgres::Client) -> anyhow::Result<()> {
    // Cheap through the partial index, so polling barely touches the measurement.
    run_until(host, options, admin, "SELECT EXISTS (SELECT 1 FROM almanac.jobs WHERE status = 'pending' AND run_after <= now())").await
}

/// The executor on `host` until `left` (a query of one boolean) says no work is left.
pub(super) async fn run_until(host: &host::Host, options: executor::Options, admin: &tokio_postgres::Client, left: &str) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let (_wake, wake_rx) = watch::channel(0u64);
    let executor = tokio::spawn(executor::run(
        host.pool.clone(),
        host.logins.clone(),
        host.loaded.clone(),
        options,
        Default::default(),
        Default::default(),
        wake_rx,
        shutdown.clone(),
    ));
    loop {
        let left: bool = admin.query_one(left, &[]).await?.get(0);
        if !left {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    executor.await?;
    Ok(())
}

/// The seed's business table with `n` accounts at 0 points.
pub(super) async fn seed_accounts(url: &str, n: i64) -> anyhow::Result<()> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client.batch_execute("CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0)").await?;
    client.execute("INSERT INTO accounts SELECT g, 0 FROM generate_series(1, $1::bigint) g", &[&n]).await?;
    client.batch_execute("VACUUM ANALYZE accounts").await?;
    Ok(())
}

/// (p50, p99) milliseconds of the host's claim at --batch 1, each in a transaction rolled
/// back (so every sample sees the same jobs due).
pub(super) async fn claim_latency(client: &tokio_postgres::Client, samples: usize) -> anyhow::Result<(f64, f64)> {
    let claim = client.prepare("SELECT * FROM almanac_job.claim(1, '-infinity', 'bench')").await?;
    let mut ms = Vec::with_capacity(samples);
    for _ in 0..samples {
        client.batch_execute("BEGIN").await?;
        let started = Instant::now();
        let rows = client.query(&claim, &[]).await?;
        ms.push(started.elapsed().as_secs_f64() * 1e3);
        ensure!(rows.len() == 1, "claim returned {} rows", rows.len());
        client.batch_execute("ROLLBACK").await?;
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    Ok((at(0.5), at(0.99)))
}

/// Mean microseconds per `run` of the real component against a no-op transaction.
pub(super) async fn overhead(plugin: &plugin::Plugin, calls: usize) -> anyhow::Result<f64> {
    let job = |i: usize| Job {
        task: TASK.into(),
        slot: Slot { start: 1_772_899_200_000_000, end: 1_772_985_600_000_000, label: "2026-03-08".into(), zone: "Asia/Shanghai".into() },
        key: i.to_string(),
        attempt: 1,
        payload: None,
    };
    for i in 0..calls.min(200) {
        plugin.run_noop(&job(i)).await?;
    }
    let started = Instant::now();
    for i in 0..calls {
        plugin.run_noop(&job(i)).await?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / calls as f64)
}
