//! TypeScript plugins (componentize-js, `guest-sdk/typescript`): the same scenario as the
//! Rust and Python daily-points, and the same stops for a plugin that loops, hoards memory,
//! commits or throws; the clock, randomness and console a Node developer expects.
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::support::{plugin_dir, HostProc, TestDb};

fn latest_shanghai_midnight() -> DateTime<Utc> {
    let schedule = almanac::calendar::Schedule::new("0 0 * * *", "Asia/Shanghai").unwrap();
    let now = Utc::now();
    schedule.slots_after(now - chrono::Duration::days(2)).take_while(|s| s.start <= now).last().unwrap().start
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_daily_points_catches_up_three_days_like_the_rust_one() {
    let db = TestDb::new().await;
    db.accounts(100).await;
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", latest_shanghai_midnight() - chrono::Duration::days(3)).await;
    let plugins = plugin_dir(&["daily_points_ts"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "2", "--batch", "8"]);
    // The first load compiles the 12 MB component.
    host.wait_log("plugin loaded", Duration::from_secs(240)).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 300, Duration::from_secs(120)).await;
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 30").await, 0, "every account paid once per day");
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, 300);
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots WHERE status = 'generated'").await, 3);
    let version: String = db.client.query_one("SELECT version FROM almanac.plugins WHERE name = 'daily-points'", &[]).await.unwrap().get(0);
    assert_eq!(version, "0.1.0-ts");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typescript_plugin_that_loops_hoards_commits_or_throws_is_stopped_like_a_rust_one() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["hostile_ts"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "4"]);
    host.wait_log("plugin loaded", Duration::from_secs(240)).await;
    let keys = ["spin", "alloc", "commit", "throw", "permanent", "ok", "clock", "clock2", "console", "enqueue", "undeclared"];
    let started: DateTime<Utc> = db.client.query_one("SELECT now()", &[]).await.unwrap().get(0);
    db.client.execute("SELECT almanac.enqueue_many('fixture-hostile-ts', '2026-01-01T00:00:00Z', $1)", &[&keys.map(String::from).to_vec()]).await.unwrap();
    // Eleven jobs, and the one `enqueue` made.
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status IN ('done', 'failed')", 12, Duration::from_secs(90)).await;
    let outcome = |key: &str| {
        let db = &db;
        let key = key.to_owned();
        async move {
            let row = db.client.query_one("SELECT status, coalesce(last_error, ''), attempts FROM almanac.jobs WHERE key = $1", &[&key]).await.unwrap();
            (row.get::<_, String>(0), row.get::<_, String>(1), row.get::<_, i32>(2))
        }
    };
    let (status, error, _) = outcome("spin").await;
    assert_eq!((status.as_str(), error.as_str()), ("failed", "plugin exceeded its deadline of 2s"));
    let (status, error, _) = outcome("alloc").await;
    assert_eq!((status.as_str(), error.as_str()), ("failed", "plugin exceeded its memory limit of 64 MiB"));
    let (status, error, _) = outcome("commit").await;
    assert!(status == "failed" && error.contains("refused") && error.contains("COMMIT"), "{error}");
    // An uncaught Error is retryable (tried twice, as max_attempts says); a permanent one is not.
    assert_eq!(outcome("throw").await, ("failed".into(), "Error: boom".into(), 2));
    assert_eq!(outcome("permanent").await, ("failed".into(), "bad input".into(), 1));
    assert_eq!(outcome("ok").await, ("done".into(), String::new(), 1));
    // Date.now() is the real clock; Math.random() differs from one instance to the next.
    let rows = db.client.query("SELECT now_ms, random FROM fixture_hostile_ts WHERE key IN ('clock', 'clock2')", &[]).await.unwrap();
    assert_eq!(rows.len(), 2);
    let ended: DateTime<Utc> = db.client.query_one("SELECT now()", &[]).await.unwrap().get(0);
    for row in &rows {
        let ms: f64 = row.get(0);
        assert!(ms >= (started.timestamp_millis() - 1000) as f64 && ms <= (ended.timestamp_millis() + 1000) as f64, "Date.now() = {ms}");
    }
    assert_ne!(rows[0].get::<_, f64>(1), rows[1].get::<_, f64>(1), "two instances drew the same Math.random()");
    // console.log reaches the host's log, under the job.
    host.wait_log("hello from console {\"n\":1}", Duration::from_secs(5)).await;
    // It enqueues as a Rust plugin does: the job it declared, with its payload; an
    // undeclared task refused by the database.
    assert_eq!(outcome("enqueue").await, ("done".into(), String::new(), 1));
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'enqueued-by-ts' AND status = 'done' AND payload->>'from' = 'ts'").await, 1);
    let (status, error, _) = outcome("undeclared").await;
    assert!(status == "failed" && error.contains("may not enqueue into task \"fixture-gate\""), "{error}");
    assert!(host.is_running());
    host.stop().await;
}
