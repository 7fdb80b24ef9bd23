//! Calm under contention (`--contention fixture_crosslock.wasm`): jobs of one task that
//! lock two rows in opposite orders, with a pause between, run on `--workers` workers
//! (they deadlock whenever two run at once; the deadlock detector frees them after
//! `deadlock_timeout`, a second by default) against the same jobs on one worker (they
//! never do). The host lowers the task's concurrency as its jobs conflict
//! (`executor::share`); the storm should finish within twice the serial time, every job
//! done, every effect once.
use std::path::Path;

use anyhow::{ensure, Context};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::harness::{fresh_database, run_until};
use crate::cluster::Cluster;
use crate::{executor, host, plugin};

const TASK: &str = "fixture-crosslock";

#[derive(Debug, Clone, Serialize)]
pub struct ContentionReport {
    pub jobs: i64,
    pub pause_seconds: f64,
    pub workers: usize,
    pub serial_seconds: f64,
    pub storm_seconds: f64,
    /// Deadlocks in the storm (transient attempts with 40P01).
    pub deadlocks: i64,
}

pub(super) async fn measure(cluster: &Cluster, file: &Path, data_dir: &Path, workers: usize, jobs: i64, pause: f64) -> anyhow::Result<ContentionReport> {
    let url = fresh_database(cluster, "almanac_contention").await?;
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    admin
        .batch_execute(&format!(
            "CREATE TABLE fixture_crosslock (id int PRIMARY KEY, n int NOT NULL); INSERT INTO fixture_crosslock VALUES (1, 0), (2, 0);
             CREATE TABLE fixture_crosslock_control (seconds float8 NOT NULL); INSERT INTO fixture_crosslock_control VALUES ({pause})"
        ))
        .await?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(file, plugins.path().join("fixture_crosslock.wasm")).with_context(|| format!("copy {}", file.display()))?;
    let options = host::Options {
        limits: plugin::Limits { allow_functions: vec!["pg_sleep".into()], ..plugin::Limits::default() },
        // Sessions of the task's login for every worker.
        executor: executor::Options { workers, ..executor::Options::default() },
        ..host::Options::new(plugins.path().to_owned(), data_dir)
    };
    let shutdown = CancellationToken::new();
    let host = host::Host::start(&url, options.clone(), &shutdown).await?;
    ensure!(host.registry().get(TASK).is_some(), "{} provides no task {TASK}", file.display());
    let serial = run(&host, &admin, &options.executor, 1, jobs).await?;
    let storm = run(&host, &admin, &options.executor, workers, jobs).await?;
    Ok(ContentionReport { jobs, pause_seconds: pause, workers, serial_seconds: serial.0, storm_seconds: storm.0, deadlocks: storm.1 })
}

/// The jobs on `workers` workers (the task may have them all): seconds from the start to
/// the last job's commit, and the deadlocks on the way; the result is checked.
async fn run(host: &host::Host, admin: &tokio_postgres::Client, defaults: &executor::Options, workers: usize, jobs: i64) -> anyhow::Result<(f64, i64)> {
    admin
        .batch_execute(&format!(
            "DELETE FROM almanac.jobs WHERE task = '{TASK}'; DELETE FROM almanac.attempts WHERE task = '{TASK}';
             TRUNCATE fixture_crosslock_effects; UPDATE fixture_crosslock SET n = 0"
        ))
        .await?;
    let slot: DateTime<Utc> = "2026-01-01T00:00:00Z".parse()?;
    let keys: Vec<String> = (0..jobs).map(|i| format!("k{i}")).collect();
    admin.execute("SELECT almanac.enqueue_many($1, $2, $3)", &[&TASK, &slot, &keys]).await?;
    let start: DateTime<Utc> = admin.query_one("SELECT clock_timestamp()", &[]).await?.get(0);
    let options = executor::Options { workers, task_workers: Some(workers), ..defaults.clone() };
    // Interrupted jobs wait out a short backoff as pending: done is when none is pending.
    let left = format!("SELECT EXISTS (SELECT 1 FROM almanac.jobs WHERE task = '{TASK}' AND status = 'pending')");
    run_until(host, options, admin, &left).await?;
    let row = admin
        .query_one(
            "SELECT (SELECT max(completed_at) FROM almanac.jobs WHERE task = $1),
                    (SELECT count(*) FROM almanac.jobs WHERE task = $1 AND status = 'done'),
                    (SELECT count(*) FROM fixture_crosslock_effects WHERE runs = 1),
                    (SELECT count(*) FROM fixture_crosslock WHERE n = $2::int),
                    (SELECT count(*) FROM almanac.attempts WHERE task = $1 AND kind = 'transient' AND error LIKE 'database error 40P01:%')",
            &[&TASK, &(jobs as i32)],
        )
        .await?;
    let (end, done, once, rows, deadlocks): (DateTime<Utc>, i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    ensure!(done == jobs && once == jobs && rows == 2, "contention on {workers} worker(s): {done} done, {once} effects once, {rows} rows right, of {jobs}");
    Ok(((end - start).as_seconds_f64(), deadlocks))
}
