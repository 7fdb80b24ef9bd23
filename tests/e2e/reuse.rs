//! A plugin that declares `reuse` (WIT 0.5.0): one instance runs up to that many of its
//! jobs in a row, and what a job sees of the ones before it is exactly its instance's
//! memory — recycled after the declared count, after a failure, and past half the cap.
use std::time::Duration;

use crate::support::{almanac, plugin_dir, HostProc, TestDb};

#[tokio::test(flavor = "multi_thread")]
async fn a_reused_instance_carries_only_its_own_memory_and_is_recycled_as_declared() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_reuse"]);
    // One worker: the jobs run one after another, in key order.
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "1"]);
    host.wait_log("plugin loaded", Duration::from_secs(60)).await;
    let keys = ["k01", "k02", "k03", "k04", "k05", "k06", "k07-fail", "k08", "k09-grow", "k10"];
    db.client.execute("SELECT almanac.enqueue_many('fixture-reuse', '2026-01-01T00:00:00Z', $1)", &[&keys.map(String::from).to_vec()]).await.unwrap();
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status IN ('done', 'failed')", 10, Duration::from_secs(60)).await;
    let rows = db.client.query("SELECT key, seen FROM fixture_reuse ORDER BY key", &[]).await.unwrap();
    let seen: Vec<(String, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let expected = [
        // Five jobs in one instance: each sees the ones before it.
        ("k01", 1),
        ("k02", 2),
        ("k03", 3),
        ("k04", 4),
        ("k05", 5),
        // A fresh one after five; k07-fail counted (2), failed, and its row rolled back.
        ("k06", 1),
        // A fresh one after the failure; k09-grow keeps 40 MiB, past half the cap.
        ("k08", 1),
        ("k09-grow", 2),
        // A fresh one after the growth.
        ("k10", 1),
    ];
    assert_eq!(seen, expected.map(|(k, n)| (k.to_owned(), n)).to_vec());
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'k07-fail' AND status = 'failed'").await, 1);
    host.stop().await;
    // A dry run always starts fresh: it shows what a job does alone.
    let (code, out, err) =
        almanac(&db.url, &["try", "fixture-reuse", "--slot", "2026-01-01T00:00:00Z", "--key", "t1", "--plugins", &plugins.path().display().to_string()]);
    assert!(code == 0 && out.contains(r#"["t1", 1]"#), "{out}{err}");
}
