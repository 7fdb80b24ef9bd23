//! Hot reload: the plugins folder is watched; a new version serves new claims while jobs
//! in flight finish on the version they started with; a broken file is refused and the
//! version before it keeps serving; a removed plugin's jobs stay pending.
use std::path::Path;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::support::{built_plugins, plugin_dir, HostProc, TestDb};

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The same component with a custom section appended: what a rebuild looks like to the
/// host (same task, other bytes, so another digest).
fn rebuilt(original: &[u8], label: &str) -> Vec<u8> {
    let name = b"almanac-test-rebuild";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(label.as_bytes());
    assert!(section.len() < 128, "one-byte LEB128 size");
    let mut bytes = original.to_vec();
    bytes.push(0); // custom section id
    bytes.push(section.len() as u8);
    bytes.extend_from_slice(&section);
    bytes
}

/// Replace a plugin file the way a deploy should: write beside it, then rename over it.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("uploading");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn loaded_digest(db: &TestDb, task: &str) -> Option<String> {
    db.client.query_opt("SELECT digest FROM almanac.plugins WHERE name = $1", &[&task]).await.unwrap().map(|r| r.get(0))
}

async fn wait_loaded(db: &TestDb, task: &str, want: &str) {
    crate::support::wait_for(&format!("{task} loaded with digest {}", &want[..12]), Duration::from_secs(60), || async {
        loaded_digest(db, task).await.as_deref() == Some(want)
    })
    .await;
}

/// Backends of this test's database waiting on a row lock (jobs held at the gate).
async fn waiting_at_gate(db: &TestDb) -> i64 {
    db.count(&format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND wait_event_type = 'Lock'", db.name)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_version_serves_new_claims_while_a_job_in_flight_finishes_on_the_old() {
    let db = TestDb::new().await;
    db.gate().await;
    let plugins = plugin_dir(&["fixture_gate"]);
    let file = plugins.path().join("fixture_gate.wasm");
    let v1 = std::fs::read(&file).unwrap();
    let v2 = rebuilt(&v1, "v2");
    let (d1, d2) = (digest(&v1), digest(&v2));
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "2"]);
    wait_loaded(&db, "fixture-gate", &d1).await;

    // Shut the gate, and let job "before" reach it: it is in flight on version 1.
    let gate = crate::support::connect(&db.url).await;
    gate.batch_execute("BEGIN; SELECT * FROM fixture_gate WHERE id = 1 FOR UPDATE").await.unwrap();
    db.enqueue("fixture-gate", "2026-01-01T00:00:00Z", &["before"]).await;
    crate::support::wait_for("job 'before' waiting at the gate", Duration::from_secs(30), || async { waiting_at_gate(&db).await == 1 }).await;

    replace(&file, &v2);
    // Logged once swapped in: a job that starts after this line runs version 2.
    host.wait_log("plugin reloaded", Duration::from_secs(60)).await;
    assert_eq!(loaded_digest(&db, "fixture-gate").await.as_deref(), Some(d2.as_str()));
    db.enqueue("fixture-gate", "2026-01-01T00:00:00Z", &["after"]).await;
    crate::support::wait_for("job 'after' waiting at the gate too", Duration::from_secs(30), || async { waiting_at_gate(&db).await == 2 }).await;

    gate.batch_execute("COMMIT").await.unwrap();
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 2, Duration::from_secs(30)).await;
    let digest_of = |key: &'static str| {
        let client = &db.client;
        async move { client.query_one("SELECT plugin_digest FROM almanac.jobs WHERE key = $1", &[&key]).await.unwrap().get::<_, String>(0) }
    };
    assert_eq!(digest_of("before").await, d1, "the job in flight finished on the version it started with");
    assert_eq!(digest_of("after").await, d2, "a job claimed after the reload ran on the new version");
    assert_eq!(db.count("SELECT count(*) FROM fixture_gate_runs").await, 2, "each job ran once");
    assert_eq!(db.count("SELECT passed::bigint FROM fixture_gate").await, 2);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reloading_during_a_run_loses_nothing_and_runs_nothing_twice() {
    const ACCOUNTS: i64 = 1500;
    let db = TestDb::new().await;
    db.accounts(ACCOUNTS).await;
    let plugins = plugin_dir(&["daily_points"]);
    let file = plugins.path().join("daily_points.wasm");
    let v1 = std::fs::read(&file).unwrap();
    let (v2, v3) = (rebuilt(&v1, "v2"), rebuilt(&v1, "v3"));
    let (d1, d2, d3) = (digest(&v1), digest(&v2), digest(&v3));
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "3"]);
    wait_loaded(&db, "daily-points", &d1).await;
    let enqueue_slot = |day: u32| {
        let client = &db.client;
        async move {
            let slot = format!("2026-03-{day:02}T16:00:00Z");
            client
                .execute("INSERT INTO almanac.jobs (task, slot, key) SELECT 'daily-points', $1::text::timestamptz, id::text FROM accounts", &[&slot])
                .await
                .unwrap();
        }
    };
    // Two reloads while two slots' jobs run; the third slot comes after both.
    enqueue_slot(1).await;
    db.wait_count("SELECT least(count(*), 1) FROM almanac.jobs WHERE status = 'done'", 1, Duration::from_secs(30)).await;
    db.client.batch_execute("CREATE TABLE done_before AS SELECT slot, key FROM almanac.jobs WHERE status = 'done'").await.unwrap();
    replace(&file, &v2);
    enqueue_slot(2).await;
    host.wait_log(&format!("digest={}", &d2[..12]), Duration::from_secs(60)).await;
    replace(&file, &v3);
    host.wait_log(&format!("digest={}", &d3[..12]), Duration::from_secs(60)).await;
    enqueue_slot(3).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 3 * ACCOUNTS, Duration::from_secs(120)).await;

    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await, 0, "nothing failed or left behind");
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, 3 * ACCOUNTS, "one ledger row per job");
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 30").await, 0, "each account paid once per slot");
    let db = &db;
    let count = |sql: String| async move { db.count(&sql).await };
    assert_eq!(count(format!("SELECT count(*) FROM almanac.jobs WHERE plugin_digest NOT IN ('{d1}', '{d2}', '{d3}')")).await, 0, "only the three versions ran");
    assert!(count("SELECT count(*) FROM done_before".into()).await > 0);
    assert_eq!(
        count(format!("SELECT count(*) FROM almanac.jobs JOIN done_before USING (slot, key) WHERE plugin_digest <> '{d1}'")).await,
        0,
        "jobs done before the first reload ran on version 1"
    );
    assert_eq!(
        count(format!("SELECT count(*) FROM almanac.jobs WHERE slot = '2026-03-03T16:00:00Z' AND plugin_digest = '{d3}'")).await,
        ACCOUNTS,
        "jobs enqueued after the last reload ran on version 3"
    );
    host.stop().await;
    assert!(!host.log().contains("ERROR"), "{}", host.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_replacement_is_refused_and_a_removed_plugin_leaves_its_jobs_pending() {
    let db = TestDb::new().await;
    db.accounts(2).await;
    let plugins = plugin_dir(&["daily_points", "fixture_flaky"]);
    let file = plugins.path().join("daily_points.wasm");
    let v1 = std::fs::read(&file).unwrap();
    let d1 = digest(&v1);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    wait_loaded(&db, "daily-points", &d1).await;

    // Half a file, as a copy cut short would leave it.
    replace(&file, &v1[..v1.len() / 2]);
    host.wait_log("plugin not reloaded", Duration::from_secs(30)).await;
    let log = host.log();
    let line = log.lines().find(|l| l.contains("plugin not reloaded")).unwrap();
    assert!(line.contains("daily_points.wasm: invalid component") && line.contains("keeps serving") && line.contains(&d1[..12]), "{line}");
    db.enqueue("daily-points", "2026-01-01T00:00:00Z", &["1"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 1, Duration::from_secs(30)).await;
    assert_eq!(loaded_digest(&db, "daily-points").await.as_deref(), Some(d1.as_str()));
    assert_eq!(db.count(&format!("SELECT count(*) FROM almanac.jobs WHERE plugin_digest = '{d1}'")).await, 1, "the old version served the job");

    // Removed: its job stays pending. A later job of another task, behind it in claim
    // order, proves the workers went past it.
    std::fs::remove_file(&file).unwrap();
    host.wait_log("plugin removed", Duration::from_secs(30)).await;
    db.client
        .batch_execute(
            "INSERT INTO almanac.jobs (task, slot, key, run_after) VALUES
               ('daily-points', '2026-03-02T16:00:00Z', '2', now() - interval '1 hour'),
               ('fixture-flaky', '2026-01-01T00:00:00Z', 'sentinel', now())",
        )
        .await
        .unwrap();
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-flaky' AND status = 'done'", 1, Duration::from_secs(30)).await;
    let row = db.client.query_one("SELECT status, attempts FROM almanac.jobs WHERE task = 'daily-points' AND key = '2'", &[]).await.unwrap();
    assert_eq!((row.get::<_, String>(0).as_str(), row.get::<_, i32>(1)), ("pending", 0), "a removed plugin's job is left pending, untried");

    // Put back: it loads again and the waiting job runs.
    std::fs::copy(built_plugins().join("daily_points.wasm"), &file).unwrap();
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND status = 'done'", 2, Duration::from_secs(30)).await;
    host.stop().await;
}
