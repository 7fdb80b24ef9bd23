//! Python plugins (componentize-py, `guest-sdk/python`): the same scenario as the Rust
//! daily-points, and the same stops for a plugin that loops, hoards memory or commits.
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::support::{plugin_dir, HostProc, TestDb};

fn latest_shanghai_midnight() -> DateTime<Utc> {
    let schedule = almanac::calendar::Schedule::new("0 0 * * *", "Asia/Shanghai").unwrap();
    let now = Utc::now();
    schedule.slots_after(now - chrono::Duration::days(2)).take_while(|s| s.start <= now).last().unwrap().start
}

/// The plugin's own test (`pytest`, almanac_testing): tables prepared, plan and run for a
/// slot, the accounts asserted, against a real PostgreSQL.
#[test]
fn the_python_daily_points_own_test_passes() {
    let project = crate::support::workspace().join("plugins/daily-points-py");
    let _cluster = crate::support::ProjectClusters(vec![project.clone()]);
    let pytest = crate::support::workspace().join(".venv/bin/pytest");
    let out = std::process::Command::new(&pytest)
        .args(["-q", "-p", "no:cacheprovider"])
        .env("ALMANAC", crate::support::almanac_bin())
        .current_dir(&project)
        .output()
        .unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && report.contains("2 passed"), "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_daily_points_catches_up_three_days_on_two_hosts() {
    let db = TestDb::new().await;
    db.accounts(300).await;
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", latest_shanghai_midnight() - chrono::Duration::days(3)).await;
    let plugins = plugin_dir(&["daily_points_py"]);
    let mut a = HostProc::spawn(&db, plugins.path(), &["--workers", "2", "--batch", "8"]);
    // The first host compiles the 18 MB component (once; the second finds it cached).
    a.wait_log("plugin loaded", Duration::from_secs(240)).await;
    let mut b = HostProc::spawn(&db, plugins.path(), &["--workers", "2"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 900, Duration::from_secs(120)).await;
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 30").await, 0, "every account paid once per day");
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, 900);
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots WHERE status = 'generated'").await, 3);
    let version: String = db.client.query_one("SELECT version FROM almanac.plugins WHERE name = 'daily-points'", &[]).await.unwrap().get(0);
    assert_eq!(version, "0.1.0-py");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_plugin_that_loops_hoards_or_commits_is_stopped_like_a_rust_one() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["hostile_py"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "4"]);
    host.wait_log("plugin loaded", Duration::from_secs(240)).await;
    db.client
        .batch_execute(
            "SELECT almanac.enqueue_many('fixture-hostile-py', '2026-01-01T00:00:00Z', ARRAY['spin', 'alloc', 'commit', 'ok', 'enqueue', 'undeclared'])",
        )
        .await
        .unwrap();
    // Six jobs, and the one `enqueue` made.
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status IN ('done', 'failed')", 7, Duration::from_secs(60)).await;
    let outcome = |key: &str| {
        let db = &db;
        let key = key.to_owned();
        async move {
            let row = db.client.query_one("SELECT status, coalesce(last_error, '') FROM almanac.jobs WHERE key = $1", &[&key]).await.unwrap();
            (row.get::<_, String>(0), row.get::<_, String>(1))
        }
    };
    assert_eq!(outcome("spin").await, ("failed".into(), "plugin exceeded its deadline of 2s".into()));
    assert_eq!(outcome("alloc").await, ("failed".into(), "plugin exceeded its memory limit of 64 MiB".into()));
    let (status, error) = outcome("commit").await;
    assert_eq!(status, "failed");
    assert!(error.contains("refused") && error.contains("COMMIT"), "{error}");
    assert_eq!(outcome("ok").await, ("done".into(), String::new()));
    // A Python plugin enqueues as a Rust one does: the job it declared, with its payload;
    // an undeclared task refused by the database.
    assert_eq!(outcome("enqueue").await, ("done".into(), String::new()));
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'enqueued-by-python' AND status = 'done' AND payload->>'from' = 'python'").await, 1);
    let (status, error) = outcome("undeclared").await;
    assert!(status == "failed" && error.contains("may not enqueue into task \"fixture-gate\""), "{error}");
    // Only the jobs that succeeded kept their rows.
    let kept: Vec<String> = db.client.query("SELECT key FROM fixture_hostile_py ORDER BY key", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(kept, ["enqueue", "enqueued-by-python", "ok"]);
    assert!(host.is_running());
    host.stop().await;
}
