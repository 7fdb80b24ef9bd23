//! The core promise: one effect per identity, across duplicate triggers, several
//! hosts and a host killed inside a job's transaction.
use std::time::Duration;

use crate::support::{almanac_bin, plugin_dir, HostProc, TestDb};

const DONE: &str = "SELECT count(*) FROM almanac.jobs WHERE status = 'done'";

#[tokio::test(flavor = "multi_thread")]
async fn the_same_identity_twice_is_one_job_and_one_effect() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    // The task is known (as a host registers it), with no slot due.
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", chrono::Utc::now()).await;
    let enqueue = || {
        std::process::Command::new(almanac_bin())
            .args(["enqueue", "daily-points", "--slot", "2026-03-07T16:00:00Z", "--key", "2"])
            .env("DATABASE_URL", &db.url)
            .output()
            .expect("almanac enqueue")
    };
    let first = enqueue();
    let second = enqueue();
    assert!(first.status.success() && second.status.success());
    assert_eq!(String::from_utf8_lossy(&first.stdout).trim(), "enqueued");
    assert_eq!(String::from_utf8_lossy(&second.stdout).trim(), "already present (no-op)");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 1);

    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count(DONE, 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT points FROM accounts WHERE id = 2").await, 10);
    assert_eq!(db.count("SELECT sum(points)::bigint FROM accounts").await, 10);

    // The job row is pruned and the trigger fires again: the job is re-created and runs,
    // but the plugin's own ledger refuses to pay twice.
    db.client.batch_execute("DELETE FROM almanac.jobs").await.unwrap();
    let third = enqueue();
    assert_eq!(String::from_utf8_lossy(&third.stdout).trim(), "enqueued");
    db.wait_count(DONE, 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT points FROM accounts WHERE id = 2").await, 10);
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, 1);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_hosts_share_five_thousand_jobs_and_pay_each_account_once() {
    let db = TestDb::new().await;
    db.accounts(5000).await;
    // The task's cursor is a day behind, so exactly one daily slot is due: whichever
    // host's scheduler gets the row lock generates it.
    db.client
        .batch_execute(
            "INSERT INTO almanac.schedules (task, cron, zone, generated_through)
             VALUES ('daily-points', '0 0 * * *', 'Asia/Shanghai', now() - interval '1 day')",
        )
        .await
        .unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let mut a = HostProc::spawn(&db, plugins.path(), &["--workers", "4", "--batch", "8"]);
    let mut b = HostProc::spawn(&db, plugins.path(), &["--workers", "4", "--batch", "1"]);
    db.wait_count(DONE, 5000, Duration::from_secs(120)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 5000);
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots WHERE status = 'generated'").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, 5000);
    assert_eq!(db.count("SELECT max(attempts)::bigint FROM almanac.jobs").await, 1);
    a.stop().await;
    b.stop().await;
    db.counts_agree().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_killed_inside_a_job_leaves_it_to_run_once_after_restart() {
    let db = TestDb::new().await;
    db.sleeper(600.0).await;
    db.enqueue("fixture-sleeper", "2026-01-01T00:00:00Z", &["k1"]).await;
    let plugins = plugin_dir(&["fixture_sleeper"]);
    let mut first = HostProc::spawn(&db, plugins.path(), &["--workers", "1"]);
    // The job is inside its transaction: its effect row is written, not committed, and
    // the plugin is asleep in the database.
    let sleeping = format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND state = 'active' AND query LIKE 'SELECT pg_sleep%'", db.name);
    db.wait_count(&sleeping, 1, Duration::from_secs(30)).await;
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(10)).await;

    db.client.batch_execute("UPDATE fixture_sleeper_control SET seconds = 0").await.unwrap();
    let mut second = HostProc::spawn(&db, plugins.path(), &["--workers", "1"]);
    db.wait_count(DONE, 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT runs::bigint FROM fixture_sleeper_effects WHERE key = 'k1'").await, 1);
    assert_eq!(db.count("SELECT attempts::bigint FROM almanac.jobs").await, 1);
    second.stop().await;
}

/// One task's slow jobs hold at most all workers but one while another task is served:
/// the other task's job runs at once instead of waiting for a slow one to end.
#[tokio::test(flavor = "multi_thread")]
async fn one_tasks_slow_jobs_leave_a_worker_for_the_others() {
    let db = TestDb::new().await;
    db.accounts(1).await;
    db.sleeper(4.0).await;
    db.enqueue("fixture-sleeper", "2026-03-01T16:00:00Z", &["a", "b", "c", "d"]).await;
    let plugins = plugin_dir(&["daily_points", "fixture_sleeper"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "2"]);
    let sleeping = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND state = 'active' AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()",
        db.name
    );
    db.wait_count(&sleeping, 1, Duration::from_secs(60)).await;
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND status = 'done'", 1, Duration::from_secs(30)).await;
    // Without the share both workers would be asleep in the sleeper's jobs, and the
    // daily-points job would wait for the first of them to end.
    assert_eq!(
        db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-sleeper' AND status = 'done'").await,
        0,
        "done while the first slow job still ran"
    );
    assert_eq!(db.count(&sleeping).await, 1, "the sleeper holds one worker, not two");
    host.stop().await;
}
