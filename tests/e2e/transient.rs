//! Transient errors never fail a job: deadlocks between workers and a server that goes
//! away under running jobs are retried on a budget of their own, recorded as what they
//! were, and counted neither as attempts nor as crashes.
use std::time::Duration;

use crate::reliability::latest_daily_slot;
use crate::support::private::PrivateCluster;
use crate::support::{connect, plugin_dir, HostProc, TestDb};

/// Eight workers at `--batch 32` over the same accounts day after day deadlock one
/// another; with `max_attempts = 1` each deadlock used to fail a healthy job for good.
#[tokio::test(flavor = "multi_thread")]
async fn deadlocks_between_workers_never_fail_a_job_with_one_attempt() {
    const ACCOUNTS: i64 = 24;
    const DAYS: i64 = 20;
    let db = TestDb::new().await;
    // Found in a tenth of a second rather than PostgreSQL's default second.
    db.client.batch_execute(&format!("ALTER DATABASE {} SET deadlock_timeout = '100ms'", db.name)).await.unwrap();
    db.accounts(ACCOUNTS).await;
    let cursor = latest_daily_slot(&db).await - chrono::Duration::days(DAYS);
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", cursor).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("almanac.toml");
    std::fs::write(&config, "[tasks.daily-points]\nmax_attempts = 1\n").unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "8", "--batch", "32", "--config", &config.display().to_string()]);
    let total = ACCOUNTS * DAYS;
    let settled = "SELECT count(*) FROM almanac.jobs WHERE status <> 'pending'";
    db.wait_count(settled, total, Duration::from_secs(120)).await;
    host.stop().await;
    let failed = db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await;
    assert_eq!(failed, 0, "jobs not done; log:\n{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10 * 20").await, 0, "every account paid once a day");
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, total);
    let spread: String = db
        .client
        .query_one("SELECT string_agg(format('%s attempt(s), %s crash(es), %s interruption(s): %s', attempts, crashes, transients, n), '; ') FROM (SELECT attempts, crashes, transients, count(*) n FROM almanac.jobs GROUP BY 1, 2, 3) s", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        db.count("SELECT count(*) FROM almanac.jobs WHERE attempts <> 1 OR crashes <> 0").await,
        0,
        "one attempt each; seen {spread}; log:\n{}",
        host.log()
    );
    // The deadlocks happened, and are on the record as what they were.
    let deadlocks = db.count("SELECT count(*) FROM almanac.attempts WHERE kind = 'transient' AND error LIKE 'database error 40P01:%'").await;
    assert!(deadlocks > 0, "no deadlock: the test did not exercise what it tests; log:\n{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM almanac.attempts WHERE kind <> 'transient'").await, 0);
    let stray = format!("SELECT count(*) FROM almanac.attempts WHERE host IS NULL OR host NOT LIKE '% pid {}'", host.pid());
    assert_eq!(db.count(&stray).await, 0, "each attempt names the host that ran it");
    assert_eq!(db.count("SELECT sum(transients) FROM almanac.jobs").await, deadlocks);
    db.counts_agree().await;
    // `almanac jobs --attempts` shows an interrupted job's history as what it was.
    let key: String = db.client.query_one("SELECT key FROM almanac.jobs WHERE transients > 0 LIMIT 1", &[]).await.unwrap().get(0);
    let (code, out, err) = crate::support::almanac(&db.url, &["jobs", "--task", "daily-points", "--attempts", &key]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().skip(1).all(|l| l.contains(" transient ") && l.contains("database error 40P01: deadlock detected")), "{out}");
    assert!(out.lines().count() > 1, "{out}");
    eprintln!("{deadlocks} deadlocks over {total} jobs, none failed");
}

/// A server that crashes under four running jobs: each is an interruption (pending
/// again, not an attempt, not a crash of its host), recorded once.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_crash_under_running_jobs_counts_neither_attempts_nor_crashes() {
    let pg = PrivateCluster::start(false).await;
    let mut db = pg.db().await;
    db.sleeper(600.0).await;
    let keys = ["k1", "k2", "k3", "k4"];
    db.enqueue("fixture-sleeper", "2026-01-01T00:00:00Z", &keys).await;
    let plugins = plugin_dir(&["fixture_sleeper"]);
    let mut host = HostProc::spawn_url(&pg.url(), plugins.path(), &["--workers", "4"], &[]);
    let sleeping = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(%'";
    db.wait_count(sleeping, 4, Duration::from_secs(60)).await;
    // After the crash the jobs run at once; the claims (committed without waiting for
    // their WAL) are made durable, as they would be a moment later anyway.
    db.client.batch_execute("UPDATE fixture_sleeper_control SET seconds = 0; CHECKPOINT").await.unwrap();
    assert_eq!(db.count("SELECT count(*) FROM almanac.claims").await, 4);
    pg.restart_immediate();
    db.client = connect(&pg.url()).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 4, Duration::from_secs(60)).await;
    let jobs = db.count("SELECT count(*) FROM almanac.jobs WHERE attempts = 1 AND crashes = 0 AND transients = 1").await;
    let spread: String = db
        .client
        .query_one("SELECT string_agg(format('%s attempt(s), %s crash(es), %s interruption(s): %s', attempts, crashes, transients, last_error), '; ') FROM almanac.jobs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(jobs, 4, "each job: one attempt, no crash, one interruption; seen {spread}; log:\n{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM almanac.attempts WHERE kind = 'transient' AND attempt = 1").await, 4);
    assert_eq!(db.count("SELECT count(*) FROM almanac.attempts WHERE kind <> 'transient'").await, 0);
    let stray = format!("SELECT count(*) FROM almanac.attempts WHERE host IS NULL OR host NOT LIKE '% pid {}'", host.pid());
    assert_eq!(db.count(&stray).await, 0, "each attempt names the host that ran it");
    assert!(host.is_running(), "log:\n{}", host.log());
    host.stop().await;
}
