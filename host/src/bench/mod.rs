//! `almanac bench`: Almanac next to the physical limit, in one run on one private
//! PostgreSQL cluster (fsync on).
//!
//! * pgbench floor — the seed's per-job SQL run by `pgbench` itself (prepared, one job
//!   per transaction, a partial pending index): the physical floor, every ratio's base;
//! * floor — the same per-job SQL (claim with SKIP LOCKED, ledger insert, points update,
//!   done mark, COMMIT) from a plain tokio-postgres loop that awaits each statement in
//!   turn, at the same concurrency; batches > 1 use a savepoint per job like the host;
//! * almanac — the real executor with the real daily-points component;
//! * plugin overhead — instantiate + run + host calls against a no-op transaction;
//! * generation — `almanac backfill` of one slot with N keys, as a child process, for
//!   its wall time and peak RSS;
//! * claim at depth — claim latency with N pending and N done rows, and the plan;
//! * connections (with `--connections`) — the executor over the unix socket, TCP, TLS
//!   and a transaction-pooling PgBouncer, on a second cluster that listens on all three;
//! * enqueue (with `--enqueue`) — the SQL API next to plain INSERTs of the same rows;
//! * languages (with `--languages`) — each language's daily-points beside `--plugin`.
//!
//! Every run checks its result (sum of points, jobs done) before its figure counts.
mod connections;
pub mod contention;
mod cpu;
mod enqueue;
mod harness;
mod history;
pub mod idle;
mod languages;
pub mod pages;
mod pgbench;
pub mod scaling;

use harness::{claim_latency, fresh_database, overhead, reset, run_almanac, run_floor, seed_accounts, timed, verified, TASK};
pub use harness::{settings, ContentionOptions, HistoryOptions, IdleOptions, Options, Run};
pub use history::{HistoryReport, Side};
pub use languages::LanguageRun;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use chrono::Utc;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::{executor, host, plugin};

const PLAIN_GENERATION: &str = include_str!("plain_generation.sql");

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub settings: Vec<(String, String)>,
    pub accounts: i64,
    pub workers: usize,
    /// The seed's SQL run by pgbench: the physical floor.
    pub pgbench: Run,
    pub floor: Vec<Run>,
    pub almanac: Vec<Run>,
    pub plugin_overhead_us: f64,
    /// Microseconds to parse and check one of daily-points' statements, uncached.
    pub policy_parse_us: f64,
    /// The same through the verdict cache, as every job after the first pays it.
    pub policy_cached_us: f64,
    /// What watching costs a job: looking its plugin up in the swappable registry and
    /// counting it (two counters and a histogram), in microseconds.
    pub observe_us: f64,
    pub generation_keys: i64,
    pub generation_seconds: f64,
    pub generation_peak_rss_mb: f64,
    /// The same rows by a plain `INSERT ... SELECT` from the accounts, in the same run.
    pub generation_plain_seconds: f64,
    pub claim_depth: i64,
    pub claim_p50_ms: f64,
    pub claim_p99_ms: f64,
    pub claim_plan: String,
    pub connections: Vec<connections::ConnectionRun>,
    pub enqueue: Option<enqueue::EnqueueReport>,
    pub history: Option<history::HistoryReport>,
    pub scaling: Option<scaling::ScalingReport>,
    pub languages: Vec<LanguageRun>,
    pub idle: Option<idle::IdleReport>,
    pub contention: Option<contention::ContentionReport>,
    /// The largest batch with and without clients loading the console's pages.
    pub pages: Option<pages::PagesReport>,
}

pub async fn run(options: Options) -> anyhow::Result<Report> {
    let settings = settings();
    let dir = options.data_dir.join("pg");
    // A cluster the bench starts, it stops, however the bench ends.
    let _stop = match Cluster::new(&dir).map(|c| c.is_running()) {
        Ok(true) => None,
        _ => Some(StopCluster(dir.clone())),
    };
    let cluster = {
        let settings = settings.clone();
        tokio::task::spawn_blocking(move || {
            let cluster = Cluster::ensure(&dir, &settings)?;
            idle::preload(&cluster)?;
            anyhow::Ok(cluster)
        })
        .await??
    };
    let url = fresh_database(&cluster, "almanac_bench").await?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(&options.plugin, plugins.path().join("daily_points.wasm")).with_context(|| format!("copy {}", options.plugin.display()))?;
    let shutdown = CancellationToken::new();
    let host_options = host::Options {
        limits: plugin::Limits { instances: options.workers as u32 * 2 + 8, ..plugin::Limits::default() },
        executor: executor::Options { workers: options.workers, poll_interval: Duration::from_millis(50), ..Default::default() },
        shutdown_grace: Duration::from_secs(10),
        ..host::Options::new(plugins.path().to_owned(), &options.data_dir)
    };
    // The business table exists before the host starts: daily-points declares it, and
    // the host grants the plugin's role on it at load.
    seed_accounts(&url, options.accounts).await?;
    let host = host::Host::start(&url, host_options.clone(), &shutdown).await?;
    let plugin = host.registry().get(TASK).cloned().context("daily-points did not load")?;
    let admin = host.pool.get().await?;

    let pgbench = pgbench::run(&cluster, &admin, "almanac_bench", &options).await?;
    let mut floor = Vec::new();
    let mut almanac = Vec::new();
    for &batch in &options.batches {
        reset(&admin).await?;
        let (seconds, cpu) = timed(&admin, &cluster, || run_floor(&host.pool, options.workers, batch, &plugin.digest)).await?;
        floor.push(verified(&admin, batch, options.accounts, seconds, Some(cpu)).await?);

        reset(&admin).await?;
        let exec = executor::Options { batch, ..host_options.executor.clone() };
        let (seconds, cpu) = timed(&admin, &cluster, || run_almanac(&host, exec, &admin)).await?;
        almanac.push(verified(&admin, batch, options.accounts, seconds, Some(cpu)).await?);
    }

    let scaling = match options.hosts.is_empty() {
        true => None,
        false => Some(scaling::measure(&cluster, &url, &options, &host_options, &host, &plugin.digest).await?),
    };
    let pages = match options.page_loads {
        Some(clients) => {
            let exec = executor::Options { batch: options.batches.iter().copied().max().unwrap_or(32), ..host_options.executor.clone() };
            Some(pages::measure(&host, &admin, &cluster, &options, exec, clients).await?)
        }
        None => None,
    };
    let plugin_overhead_us = overhead(&plugin, options.overhead_calls).await?;
    let (policy_parse_us, policy_cached_us) = statement_policy(options.overhead_calls * 10).await?;
    let observe_us = observe(&host.loaded, options.overhead_calls * 100);
    let (generation_seconds, generation_peak_rss_mb, generation_plain_seconds) = generation(&cluster, &options, plugins.path()).await?;
    let (claim_p50_ms, claim_p99_ms, claim_plan) = claim_at_depth(&cluster, &options).await?;
    let enqueue = match (options.enqueue, &plugin.spec.schedule) {
        (Some((many, single)), Some(schedule)) => {
            let slot = schedule.slots_after(Utc::now() - chrono::Duration::days(2)).next().context("a recent slot")?.start;
            Some(enqueue::measure(&url, TASK, slot, many, single, options.workers).await?)
        }
        _ => None,
    };
    drop(admin);
    drop(host);
    let languages = languages::measure(&cluster, &url, &options, &host_options).await?;
    let idle = match options.idle.hosts.is_empty() {
        true => None,
        false => Some(idle::measure(&cluster, &options.plugin, &options.idle.hosts, options.idle.window, options.idle.lone).await?),
    };
    let contention = match &options.contention {
        Some(c) => Some(contention::measure(&cluster, &c.plugin, &options.data_dir, options.workers, c.jobs, c.pause).await?),
        None => None,
    };
    let history = match &options.history {
        Some(h) => Some(history::measure(&cluster, &options, &host_options, h).await?),
        None => None,
    };
    let connections = match options.connections {
        true => connections::measure(&options, &host_options).await?,
        false => Vec::new(),
    };
    Ok(Report {
        settings: settings.extra,
        accounts: options.accounts,
        workers: options.workers,
        pgbench,
        floor,
        almanac,
        plugin_overhead_us,
        policy_parse_us,
        policy_cached_us,
        observe_us,
        generation_keys: options.generate,
        generation_seconds,
        generation_peak_rss_mb,
        generation_plain_seconds,
        claim_depth: options.generate,
        claim_p50_ms,
        claim_p99_ms,
        claim_plan,
        connections,
        enqueue,
        history,
        scaling,
        languages,
        idle,
        contention,
        pages,
    })
}

/// Stops the private cluster under its data directory when dropped.
struct StopCluster(std::path::PathBuf);

impl Drop for StopCluster {
    fn drop(&mut self) {
        if let Err(e) = Cluster::new(&self.0).and_then(|c| c.stop("fast")) {
            tracing::warn!(dir = %self.0.display(), "could not stop the benchmark's private cluster: {e}");
        }
    }
}

/// The statement policy's cost per statement, on daily-points' own statements: a full
/// libpg_query parse and tree walk, and a cached verdict.
async fn statement_policy(calls: usize) -> anyhow::Result<(f64, f64)> {
    const STATEMENTS: [&str; 3] = [
        "SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2",
        "INSERT INTO points_ledger (task, period, account_id, points, slot)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        "UPDATE accounts SET points = points + $2 WHERE id = $1",
    ];
    let policy = crate::capability::db::Policy::default();
    let schemas = ["public".to_owned()];
    let started = Instant::now();
    for i in 0..calls {
        let sql = STATEMENTS[i % STATEMENTS.len()];
        let verdict = tokio::task::block_in_place(|| policy.check_uncached(sql, &schemas));
        verdict.map_err(|e| anyhow::anyhow!("{sql}: {e}"))?;
    }
    let uncached = started.elapsed().as_secs_f64() * 1e6 / calls as f64;
    let started = Instant::now();
    for i in 0..calls {
        let sql = STATEMENTS[i % STATEMENTS.len()];
        policy.check("bench", sql, &schemas).await.map_err(|e| anyhow::anyhow!("{sql}: {e}"))?;
    }
    Ok((uncached, started.elapsed().as_secs_f64() * 1e6 / calls as f64))
}

/// Mean microseconds per job of what the executor does for hot reload and metrics.
fn observe(loaded: &plugin::Loaded, calls: usize) -> f64 {
    let metrics = crate::metrics::Metrics::default();
    let started = Instant::now();
    for i in 0..calls {
        let plugin = loaded.load().get(TASK).cloned();
        let end = if i % 10 == 0 { crate::metrics::JobEnd::Retried } else { crate::metrics::JobEnd::Done };
        metrics.record_job(TASK, end, Duration::from_micros(i as u64 % 5000));
        std::hint::black_box(plugin);
    }
    started.elapsed().as_secs_f64() * 1e6 / calls as f64
}

/// `almanac backfill` of one slot with `options.generate` keys, in a child process.
async fn generation(cluster: &Cluster, options: &Options, plugins: &Path) -> anyhow::Result<(f64, f64, f64)> {
    let url = fresh_database(cluster, "almanac_bench_depth").await?;
    seed_accounts(&url, options.generate).await?;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let exe = std::env::current_exe()?;
    let (seconds, peak_kb, status) = {
        let (url, plugins, cache) = (url.clone(), plugins.to_owned(), options.data_dir.clone());
        tokio::task::spawn_blocking(move || -> anyhow::Result<(f64, i64, i32)> {
            let started = Instant::now();
            let child = std::process::Command::new(exe)
                .args(["--data-dir"])
                .arg(&cache)
                .args(["backfill", TASK, "--from", "2026-03-08", "--to", "2026-03-09", "--plugins"])
                .arg(&plugins)
                .env("DATABASE_URL", &url)
                .stdout(std::process::Stdio::null())
                .spawn()?;
            let mut status = 0;
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
            Ok((started.elapsed().as_secs_f64(), usage.ru_maxrss, status))
        })
        .await??
    };
    ensure!(status == 0, "the generation child failed (status {status})");
    let jobs: i64 = client.query_one("SELECT count(*) FROM almanac.jobs", &[]).await?.get(0);
    ensure!(jobs == options.generate, "generated {jobs} jobs, expected {}", options.generate);
    // The baseline: the same rows for the next slot, straight from the accounts.
    let started = Instant::now();
    let plain = client.execute(PLAIN_GENERATION, &[]).await?;
    let plain_seconds = started.elapsed().as_secs_f64();
    ensure!(plain == options.generate as u64, "the plain INSERT made {plain} rows");
    client.execute("DELETE FROM almanac.jobs WHERE slot = '2026-03-09T16:00:00Z'", &[]).await?;
    Ok((seconds, peak_kb as f64 / 1024.0, plain_seconds))
}

/// Claim latency with the generated slot pending and as many done rows beside it.
async fn claim_at_depth(cluster: &Cluster, options: &Options) -> anyhow::Result<(f64, f64, String)> {
    let (client, connection) = tokio_postgres::connect(&cluster.url("almanac_bench_depth"), tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .execute(
            "INSERT INTO almanac.jobs (task, slot, key, status, attempts, completed_at, period)
             SELECT 'daily-points', '2026-03-06T16:00:00Z', g::text, 'done', 1, now(), '2026-03-07' FROM generate_series(1, $1::bigint) g",
            &[&options.generate],
        )
        .await?;
    client.batch_execute("VACUUM ANALYZE almanac.jobs").await?;
    let counts = client.query_one("SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done') FROM almanac.jobs", &[]).await?;
    ensure!(counts.get::<_, i64>(0) == options.generate && counts.get::<_, i64>(1) == options.generate, "depth not as set up");
    let plan = claim_plan(&client).await?;
    if !claim_reads_pending_index_in_order(&plan) {
        bail!("the claim does not read the partial index jobs_pending of each partition in claim order (a sort or a table scan):\n{plan}");
    }
    // Claims wait for a sweep on this run of the server, as a host makes at start.
    crate::executor::claims::sweep(&client, crate::executor::Options::default().budgets(), &[]).await?;
    // The claim runs in a session of the task's login, as a host runs it.
    let login = client.query_one("SELECT login, password FROM almanac.plugin_logins WHERE task = $1", &[&TASK]).await?;
    let url =
        cluster.url("almanac_bench_depth").replace("user=postgres", &format!("user={} password={}", login.get::<_, String>(0), login.get::<_, String>(1)));
    let (session, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let (p50, p99) = claim_latency(&session, options.claim_samples).await?;
    Ok((p50, p99, plan))
}

/// The plan of the claim's statement as the database holds it (the body of
/// `almanac_job.claim`), its variables given as the host gives them at --batch 1 and the
/// function's planner settings in force.
async fn claim_plan(client: &tokio_postgres::Client) -> anyhow::Result<String> {
    let source: String = client.query_one("SELECT prosrc FROM pg_proc WHERE oid = 'almanac_job.claim'::regproc", &[]).await?.get(0);
    let body =
        source.split("RETURN QUERY").nth(1).and_then(|b| b.rsplit_once("END")).map(|(b, _)| b.trim().trim_end_matches(';')).context("the claim's body")?;
    // A task without dependencies (`after`, V25): what the bench's daily-points is.
    let statement = body
        .replace("= mine", "= $1")
        .replace(">= floor", ">= '-infinity'")
        .replace("LIMIT batch", "LIMIT 1")
        .replace("= digest", "= $2")
        .replace("deps", "'{}'::text[]");
    client
        .batch_execute("BEGIN; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off")
        .await?;
    let plan = client.query(&format!("EXPLAIN {statement}"), &[&TASK, &"bench"]).await;
    client.batch_execute("ROLLBACK").await?;
    Ok(plan?.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n"))
}

/// The claim's scan (its CTE `due`) reads each partition's copy of jobs_pending
/// (`<partition>_run_after_slot_task_key_idx`) already in claim order: index scans merged,
/// no Sort, no table scan.
fn claim_reads_pending_index_in_order(plan: &str) -> bool {
    let due: Vec<&str> = plan.lines().skip_while(|l| l.trim() != "CTE due").skip(1).take_while(|l| l.starts_with("    ")).collect();
    let scans: Vec<&&str> = due.iter().filter(|l| l.contains(" Scan ")).collect();
    !scans.is_empty()
        && scans.iter().all(|l| l.contains("Index Scan using jobs_") && l.contains("_run_after_slot_task_key_idx"))
        && !due.iter().any(|l| l.trim_start().trim_start_matches("->").trim_start().starts_with("Sort  ("))
}
