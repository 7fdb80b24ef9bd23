//! Quiet when idle, quick when a job comes: real `almanac run` processes (children of
//! this one, at their defaults but for the plugins folder) on a database of their own.
//!
//! * idle — with nothing due, every statement the hosts send over a window, from
//!   `pg_stat_statements`, per host per second (1 and 4 hosts by default);
//! * lone jobs — one job at a time enqueued on an idle host (`almanac.enqueue`, committed):
//!   from the enqueue's transaction to the claim's (`created_at` to `completed_at`, both
//!   the database's clock), p50 and p99.
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use serde::Serialize;

use super::harness::{fresh_database, seed_accounts};
use crate::cluster::Cluster;

const DATABASE: &str = "almanac_idle";

#[derive(Debug, Clone, Serialize)]
pub struct IdleRun {
    pub hosts: usize,
    pub seconds: f64,
    /// Statements the database executed for the hosts over the window.
    pub statements: i64,
    pub per_host_per_second: f64,
    /// The most frequent statements, (calls, text), for the reader who wants to know why.
    pub top: Vec<(i64, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct IdleReport {
    pub runs: Vec<IdleRun>,
    pub lone_jobs: usize,
    pub lone_p50_ms: f64,
    pub lone_p99_ms: f64,
    pub lone_max_ms: f64,
}

/// Load pg_stat_statements into the bench's cluster (a restart, once: the setting is
/// kept), before anything connects.
pub(super) fn preload(cluster: &Cluster) -> anyhow::Result<()> {
    let conf = cluster.data_dir.join("postgresql.auto.conf");
    if std::fs::read_to_string(&conf).unwrap_or_default().contains("pg_stat_statements") {
        return Ok(());
    }
    let mut text = std::fs::read_to_string(&conf).unwrap_or_default();
    text.push_str("shared_preload_libraries = 'pg_stat_statements'\n");
    std::fs::write(&conf, text)?;
    cluster.stop("fast")?;
    cluster.start()?;
    Ok(())
}

/// `hosts`: the numbers of hosts to measure idle; `window`: how long each is watched;
/// `lone`: how many lone jobs to time.
pub async fn measure(cluster: &Cluster, plugin: &Path, hosts: &[usize], window: Duration, lone: usize) -> anyhow::Result<IdleReport> {
    let url = fresh_database(cluster, DATABASE).await?;
    seed_accounts(&url, 10).await?;
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    admin.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").await?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(plugin, plugins.path().join("daily_points.wasm"))?;
    let data = tempfile::tempdir()?;
    let mut runs = Vec::new();
    let mut lone_ms = Vec::new();
    for &n in hosts {
        let children = Children((0..n).map(|i| spawn(&url, plugins.path(), &data.path().join(format!("host{i}")))).collect::<anyhow::Result<_>>()?);
        settle(&admin, n, &children).await?;
        let oid: u32 = admin.query_one("SELECT oid FROM pg_database WHERE datname = current_database()", &[]).await?.get(0);
        admin.batch_execute("SELECT pg_stat_statements_reset()").await?;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        let seconds = started.elapsed().as_secs_f64();
        // The bench's own statements (the reset, this read) are left out by their text.
        let rows = admin
            .query(
                "SELECT calls, query FROM pg_stat_statements
                  WHERE dbid = $1 AND query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC",
                &[&oid],
            )
            .await?;
        let statements: i64 = rows.iter().map(|r| r.get::<_, i64>(0)).sum();
        let top =
            rows.iter().take(12).map(|r| (r.get(0), crate::text::clip(r.get::<_, String>(1).split_whitespace().collect::<Vec<_>>().join(" "), 100))).collect();
        runs.push(IdleRun { hosts: n, seconds, statements, per_host_per_second: statements as f64 / seconds / n as f64, top });
        if n == 1 {
            lone_ms = lone_jobs(&admin, lone).await?;
        }
        drop(children);
    }
    ensure!(!lone_ms.is_empty() || !hosts.contains(&1), "no lone job timed");
    lone_ms.sort_by(f64::total_cmp);
    let at = |q: f64| lone_ms.get(((lone_ms.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
    Ok(IdleReport { runs, lone_jobs: lone_ms.len(), lone_p50_ms: at(0.5), lone_p99_ms: at(0.99), lone_max_ms: at(1.0) })
}

fn spawn(url: &str, plugins: &Path, data: &Path) -> anyhow::Result<Child> {
    std::fs::create_dir_all(data)?;
    let log = std::fs::File::create(data.join("host.log"))?;
    let exe = std::env::current_exe().context("this executable")?;
    Command::new(exe)
        .args(["--data-dir", &data.display().to_string(), "run", "--plugins", &plugins.display().to_string()])
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("start almanac run")
}

/// The hosts, stopped (SIGTERM, then waited for) when dropped.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &self.0 {
            // SAFETY: kill(2) on a child this process started and has not reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

/// Until `n` hosts have said they are alive and nothing is due, then a few seconds for
/// their idle back-off to reach its longest.
async fn settle(admin: &tokio_postgres::Client, n: usize, children: &Children) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let row = admin
            .query_one(
                "SELECT (SELECT count(*) FROM almanac.hosts WHERE seen_at > now() - interval '30 seconds'),
                        (SELECT count(*) FROM almanac.jobs WHERE status = 'pending' AND run_after <= now())",
                &[],
            )
            .await;
        if let Ok(row) = row {
            let (live, due): (i64, i64) = (row.get(0), row.get(1));
            if live == n as i64 && due == 0 {
                break;
            }
        }
        ensure!(Instant::now() < deadline, "{n} host(s) did not come up idle within 2 minutes (logs beside {:?})", children.0.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(())
}

/// Milliseconds from each lone job's enqueue to its claim, one job at a time with the
/// host idle between them.
async fn lone_jobs(admin: &tokio_postgres::Client, n: usize) -> anyhow::Result<Vec<f64>> {
    // Today, off the calendar, as an application may enqueue. (A slot in a month older
    // than the claim floor, last month, waits up to the floor's refresh: 5 s.)
    let slot: chrono::DateTime<chrono::Utc> = admin.query_one("SELECT date_trunc('day', now())", &[]).await?.get(0);
    let enqueue = admin.prepare("SELECT almanac.enqueue('daily-points', $1, $2, NULL, NULL, true)").await?;
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let key = (1_000_000 + i).to_string();
        admin.execute(&enqueue, &[&slot, &key]).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let took = loop {
            let row = admin
                .query_opt(
                    "SELECT extract(epoch FROM completed_at - created_at)::float8 * 1000 FROM almanac.jobs
                      WHERE task = 'daily-points' AND slot = $1 AND key = $2 AND status = 'done'",
                    &[&slot, &key],
                )
                .await?;
            if let Some(row) = row {
                break row.get::<_, f64>(0);
            }
            ensure!(Instant::now() < deadline, "lone job {key} not done within 30 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        ms.push(took);
        // Idle again: the workers back off as they would between real arrivals.
        tokio::time::sleep(Duration::from_millis(100 + (i as u64 * 37) % 400)).await;
    }
    Ok(ms)
}
