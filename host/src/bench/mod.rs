//! `almanac bench`: Almanac next to the physical limit, in one run on one private
//! PostgreSQL cluster (fsync on).
//!
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
//! * enqueue (with `--enqueue`) — the SQL API next to plain INSERTs of the same rows.
//!
//! Every run checks its result (sum of points, jobs done) before its figure counts.
mod connections;
mod cpu;
mod enqueue;
mod history;
pub mod scaling;

pub use history::{HistoryOptions, HistoryReport, Side};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::bindings::almanac::plugin::types::{Job, Slot};
use crate::cluster::{Cluster, Settings};
use crate::{executor, host, plugin};

const FLOOR_CLAIM: &str = include_str!("floor_claim.sql");
const FLOOR_DONE: &str = include_str!("floor_done.sql");
const LEDGER: &str = include_str!("ledger.sql");
const POINTS: &str = include_str!("points.sql");
const RESET: &str = include_str!("reset.sql");
const PLAIN_GENERATION: &str = include_str!("plain_generation.sql");
const TASK: &str = "daily-points";

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
    pub history: Option<history::HistoryOptions>,
    /// Also measure with these numbers of hosts on the database (at the largest batch).
    pub hosts: Vec<usize>,
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

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub settings: Vec<(String, String)>,
    pub accounts: i64,
    pub workers: usize,
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
}

pub async fn run(options: Options) -> anyhow::Result<Report> {
    let settings = settings();
    let cluster = {
        let (dir, settings) = (options.data_dir.join("pg"), settings.clone());
        tokio::task::spawn_blocking(move || Cluster::ensure(&dir, &settings)).await??
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
    })
}

async fn fresh_database(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    let (admin, connection) = tokio_postgres::connect(&cluster.url("postgres"), tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await?;
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await?;
    Ok(cluster.url(name))
}

async fn reset(admin: &tokio_postgres::Client) -> anyhow::Result<()> {
    admin.batch_execute(RESET).await?;
    admin.batch_execute("VACUUM ANALYZE accounts").await?;
    admin.batch_execute("VACUUM ANALYZE almanac.jobs").await?;
    admin.batch_execute("CHECKPOINT").await?;
    Ok(())
}

/// Run `work`; the elapsed time is from the database's clock at the start to the last
/// job's completion, the CPU figures are deltas over the same work.
async fn timed<F, Fut>(admin: &tokio_postgres::Client, cluster: &Cluster, work: F) -> anyhow::Result<(f64, (f64, f64))>
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

async fn verified(admin: &tokio_postgres::Client, batch: usize, accounts: i64, seconds: f64, cpu: Option<(f64, f64)>) -> anyhow::Result<Run> {
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
async fn run_floor(pool: &deadpool_postgres::Pool, workers: usize, batch: usize, digest: &str) -> anyhow::Result<()> {
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

async fn run_almanac(host: &host::Host, options: executor::Options, admin: &tokio_postgres::Client) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let (_wake, wake_rx) = watch::channel(0u64);
    let executor =
        tokio::spawn(executor::run(host.pool.clone(), host.logins.clone(), host.loaded.clone(), options, Default::default(), wake_rx, shutdown.clone()));
    // Cheap through the partial index, so polling barely touches the measurement.
    loop {
        let left: bool = admin.query_one("SELECT EXISTS (SELECT 1 FROM almanac.jobs WHERE status = 'pending' AND run_after <= now())", &[]).await?.get(0);
        if !left {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    executor.await?;
    Ok(())
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

/// Mean microseconds per `run` of the real component against a no-op transaction.
async fn overhead(plugin: &plugin::Plugin, calls: usize) -> anyhow::Result<f64> {
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

/// The seed's business table with `n` accounts at 0 points.
async fn seed_accounts(url: &str, n: i64) -> anyhow::Result<()> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client.batch_execute("CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0)").await?;
    client.execute("INSERT INTO accounts SELECT g, 0 FROM generate_series(1, $1::bigint) g", &[&n]).await?;
    client.batch_execute("VACUUM ANALYZE accounts").await?;
    Ok(())
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
    crate::executor::claims::sweep(&client, crate::executor::transient::BUDGET).await?;
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
    let statement = body.replace("= mine", "= $1").replace(">= floor", ">= '-infinity'").replace("LIMIT batch", "LIMIT 1").replace("= digest", "= $2");
    client
        .batch_execute("BEGIN; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off")
        .await?;
    let plan = client.query(&format!("EXPLAIN {statement}"), &[&TASK, &"bench"]).await;
    client.batch_execute("ROLLBACK").await?;
    Ok(plan?.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n"))
}

/// (p50, p99) milliseconds of the host's claim at --batch 1, each in a transaction rolled
/// back (so every sample sees the same jobs due).
async fn claim_latency(client: &tokio_postgres::Client, samples: usize) -> anyhow::Result<(f64, f64)> {
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
