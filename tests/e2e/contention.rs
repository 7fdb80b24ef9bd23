//! Calm under contention: jobs of one task that deadlock one another lower that task's
//! concurrency on the host (down to one worker) and raise it again as they stop; other
//! tasks keep theirs; no job fails and every effect happens once. How long the storm takes
//! against the same jobs run one at a time is a figure of `almanac bench --contention`.
use std::time::Duration;

use crate::support::{almanac, plugin_dir, HostProc, TestDb};

/// fixture-crosslock's rows and its pause, before the plugin loads.
async fn crosslock(db: &TestDb, seconds: f64) {
    db.client
        .batch_execute(&format!(
            "CREATE TABLE fixture_crosslock (id int PRIMARY KEY, n int NOT NULL); INSERT INTO fixture_crosslock VALUES (1, 0), (2, 0);
             CREATE TABLE fixture_crosslock_control (seconds float8 NOT NULL); INSERT INTO fixture_crosslock_control VALUES ({seconds})"
        ))
        .await
        .expect("create fixture_crosslock");
}

/// 120 jobs that lock two rows in opposite orders, on eight workers: the first deadlocks
/// halve the task's workers until it runs alone; a sleeper task beside it keeps its share.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_that_deadlock_lower_their_tasks_concurrency_and_none_fails() {
    const JOBS: i64 = 120;
    let db = TestDb::new().await;
    // Found in a tenth of a second rather than the default second: the test stays short,
    // and the storm is the same.
    db.client.batch_execute(&format!("ALTER DATABASE {} SET deadlock_timeout = '100ms'", db.name)).await.unwrap();
    crosslock(&db, 0.05).await;
    db.sleeper(0.0).await;
    let keys: Vec<String> = (0..JOBS).map(|i| format!("k{i}")).collect();
    db.enqueue("fixture-crosslock", "2026-03-01T00:00:00Z", &keys.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let plugins = plugin_dir(&["fixture_crosslock", "fixture_sleeper"]);
    // One attempt: a deadlock counted as an attempt would fail the job for good.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("almanac.toml");
    std::fs::write(&config, "[tasks.fixture-crosslock]\nmax_attempts = 1\n").unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "8", "--task-workers", "8", "--config", &config.display().to_string()]);
    // The host says, within a second of the change, that the task runs on one worker.
    let alone = r#"SELECT count(*) FROM almanac.hosts WHERE concurrency @> '[{"task": "fixture-crosslock", "limit": 1, "share": 8}]'"#;
    db.wait_count(alone, 1, Duration::from_secs(60)).await;
    let (code, out, err) = almanac(&db.url, &["status"]);
    assert!(code <= 1, "{err}");
    assert!(out.contains("fixture-crosslock: 1 of 8 workers while its jobs conflict"), "{out}");
    // Meanwhile the other task's jobs run at its full share.
    let sleepers: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
    db.enqueue("fixture-sleeper", "2026-03-01T00:00:00Z", &sleepers.iter().map(String::as_str).collect::<Vec<_>>()).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", JOBS + 40, Duration::from_secs(120)).await;
    host.stop().await;
    db.counts_agree().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await, 0, "none failed; log:\n{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM fixture_crosslock_effects WHERE runs = 1").await, JOBS, "every effect once");
    assert_eq!(db.count("SELECT count(*) FROM fixture_crosslock WHERE n <> 120").await, 0, "both rows updated by every job once");
    let deadlocks = db.count("SELECT count(*) FROM almanac.attempts WHERE kind = 'transient' AND error LIKE 'database error 40P01:%'").await;
    assert!(deadlocks > 0, "no deadlock: the test did not exercise what it tests; log:\n{}", host.log());
    // Far fewer than eight workers colliding for 120 jobs would make.
    assert!(deadlocks < JOBS / 2, "{deadlocks} deadlocks: the concurrency did not come down; log:\n{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM almanac.attempts WHERE kind <> 'transient'").await, 0);
    assert!(host.log().contains("concurrency lowered"), "the host says so; log:\n{}", host.log());
    // The other task was not held behind it: its jobs, enqueued while the storm ran,
    // were all done before the storm's last.
    let before = db
        .count(
            "SELECT count(*) FROM almanac.jobs s WHERE s.task = 'fixture-sleeper'
                AND s.completed_at < (SELECT max(completed_at) FROM almanac.jobs WHERE task = 'fixture-crosslock')",
        )
        .await;
    assert_eq!(before, 40, "the sleeper's jobs waited for the storm; log:\n{}", host.log());
    eprintln!("{deadlocks} deadlocks over {JOBS} jobs, none failed");
}
