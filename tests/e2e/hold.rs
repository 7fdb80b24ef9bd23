//! `almanac hold` stops running a task's jobs on every host at once, scheduled or on
//! demand (`pause` stops only the generation of new slots); nothing is lost, and
//! `release` runs them.
use std::time::Duration;

use crate::support::{almanac, plugin_dir, HostProc, TestDb};

#[tokio::test(flavor = "multi_thread")]
async fn a_held_task_runs_no_job_on_any_host_until_it_is_released() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    db.sleeper(0.0).await;
    // Registered as a host would, its cursor at now: only the enqueued jobs are due.
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", chrono::Utc::now()).await;
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    let (code, out, err) = almanac(&db.url, &["hold", "daily-points", "--reason", "the ledger is being repaired"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("daily-points held: no job of it starts on any host from now on; 3 pending wait"), "{out}");
    let (code, out, _) = almanac(&db.url, &["hold", "daily-points"]);
    assert!(code == 0 && out.contains("already held (nothing recorded)"), "{out}");
    let plugins = plugin_dir(&["daily_points", "fixture_sleeper"]);
    let mut hosts = [HostProc::spawn(&db, plugins.path(), &["--workers", "2"]), HostProc::spawn(&db, plugins.path(), &["--workers", "2"])];
    // The hosts run the other task's jobs: each witness enqueued after the hold is done,
    // and a held job enqueued now waits with the others.
    for witness in ["w1", "w2", "w3"] {
        db.enqueue("fixture-sleeper", "2026-01-01T00:00:00Z", &[witness]).await;
        db.enqueue("daily-points", "2026-03-02T16:00:00Z", &[&witness[1..]]).await;
        let done = format!("SELECT count(*) FROM almanac.jobs WHERE key = '{witness}' AND status = 'done'");
        db.wait_count(&done, 1, Duration::from_secs(30)).await;
    }
    let untouched = "SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND status = 'pending' AND attempts = 0";
    assert_eq!(db.count(untouched).await, 6, "no held job started");
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 0").await, 0);
    let (code, out, _) = almanac(&db.url, &["status"]);
    assert!(out.contains("daily-points (held)"), "{code} {out}");
    let (_, json, _) = almanac(&db.url, &["status", "--json"]);
    assert!(json.lines().any(|l| l.contains("\"task\":\"daily-points\"") && l.contains("\"held\":true")), "{json}");

    let (code, out, err) = almanac(&db.url, &["release", "daily-points", "--reason", "repaired"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("daily-points released: its 6 pending jobs run again"), "{out}");
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND status = 'done' AND attempts = 1", 6, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points = 20").await, 3, "each account paid once per slot");
    let recorded = "SELECT count(*) FROM almanac.changes WHERE task = 'daily-points'
                    AND ((action = 'hold' AND reason = 'the ledger is being repaired') OR (action = 'release' AND reason = 'repaired'))";
    assert_eq!(db.count(recorded).await, 2, "each change recorded once, with its reason");
    for host in &mut hosts {
        assert!(host.is_running(), "{}", host.log());
        host.stop().await;
    }
    // `pause` says what it stops, and what it does not.
    let (code, out, _) = almanac(&db.url, &["pause", "daily-points"]);
    assert!(
        code == 0 && out.contains("no new slots are generated; jobs already generated or enqueued still run (`almanac hold daily-points` stops them)"),
        "{out}"
    );
    let (code, _, err) = almanac(&db.url, &["hold", "no-such-task"]);
    assert!(code != 0 && err.contains("no task \"no-such-task\" (known: daily-points"), "{err}");
}
