//! Hostile and broken plugins: each failure is a recorded, explained attempt, and the
//! host keeps serving everything else.
use std::time::Duration;

use crate::support::{plugin_dir, HostProc, TestDb};

async fn last_error(db: &TestDb, task: &str) -> (String, String, i32) {
    let row = db
        .client
        .query_one("SELECT status, coalesce(last_error, ''), attempts FROM almanac.jobs WHERE task = $1", &[&task])
        .await
        .unwrap_or_else(|e| panic!("job of {task}: {e}"));
    (row.get(0), row.get(1), row.get(2))
}

async fn enqueue(db: &TestDb, task: &str, key: &str) {
    db.client.execute("INSERT INTO almanac.jobs (task, slot, key) VALUES ($1, '2026-01-01T00:00:00Z', $2)", &[&task, &key]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn trap_loop_memory_bomb_and_commit_fail_alone() {
    let db = TestDb::new().await;
    db.accounts(50).await;
    db.client
        .batch_execute(
            "INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'daily-points', '2026-03-07T16:00:00Z', id::text FROM accounts",
        )
        .await
        .unwrap();
    for task in ["fixture-trap", "fixture-spin", "fixture-membomb", "fixture-commit"] {
        enqueue(&db, task, "k1").await;
    }
    let plugins = plugin_dir(&["daily_points", "fixture_trap", "fixture_spin", "fixture_membomb", "fixture_commit"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "2"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 4, Duration::from_secs(60)).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 50, Duration::from_secs(60)).await;

    let (_, trap, attempts) = last_error(&db, "fixture-trap").await;
    assert!(
        trap.starts_with(
            "wasm trap: wasm `unreachable` instruction executed; plugin stderr: thread '<unnamed>' (1) panicked at plugins/fixtures/trap/src/lib.rs"
        ),
        "{trap}"
    );
    assert!(trap.contains("fixture-trap refuses key k1"), "panic message kept: {trap}");
    assert_eq!(attempts, 1);
    // `status` shows the whole error, whose end (the panic message) is the useful part.
    let (_, status, _) = crate::support::almanac(&db.url, &["status"]);
    let line = status.lines().skip_while(|l| !l.starts_with("fixture-trap")).nth(1).unwrap_or_default();
    assert!(line.starts_with("    last error: wasm trap") && line.contains("fixture-trap refuses key k1"), "{status}");
    let (_, spin, _) = last_error(&db, "fixture-spin").await;
    assert_eq!(spin, "plugin exceeded its deadline of 500ms");
    let (_, bomb, _) = last_error(&db, "fixture-membomb").await;
    assert_eq!(bomb, "plugin exceeded its memory limit of 64 MiB");
    let (_, commit, _) = last_error(&db, "fixture-commit").await;
    assert_eq!(commit, "refused: COMMIT is transaction control, which belongs to the host (the job's transaction commits when `run` returns ok)");
    // The row it inserted before the COMMIT rolled back with the attempt.
    assert_eq!(db.count("SELECT count(*) FROM fixture_commit_effects").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10").await, 0);
    assert!(host.is_running(), "the host survived; log:\n{}", host.log());
    // A host panic starts a line; the plugin's panic is quoted inside its job's error.
    assert!(!host.log().lines().any(|l| l.starts_with("thread '")), "no host panic; log:\n{}", host.log());
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_files_in_the_plugins_folder_are_named_and_skipped() {
    let db = TestDb::new().await;
    db.accounts(5).await;
    db.client
        .batch_execute(
            "INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'daily-points', '2026-03-07T16:00:00Z', id::text FROM accounts",
        )
        .await
        .unwrap();
    let plugins = plugin_dir(&["daily_points", "fixture_otherworld", "fixture_badcron"]);
    // The same task twice: the file that sorts later is refused.
    std::fs::copy(plugins.path().join("daily_points.wasm"), plugins.path().join("zz_copy.wasm")).unwrap();
    std::fs::write(plugins.path().join("garbage.wasm"), b"this is not wasm").unwrap();
    // The smallest valid core module: magic and version 1, no sections.
    std::fs::write(plugins.path().join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    // A component header followed by junk.
    std::fs::write(plugins.path().join("truncated.wasm"), b"\0asm\x0d\0\x01\0\xff\xff").unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 5, Duration::from_secs(30)).await;
    let log = host.log();
    let dir = plugins.path().display();
    for line in [
        format!("plugin not loaded: {dir}/garbage.wasm: not a WebAssembly file"),
        format!("plugin not loaded: {dir}/core.wasm: a core WebAssembly module, not a component"),
        format!("plugin not loaded: {dir}/truncated.wasm: invalid component"),
        format!("plugin not loaded: {dir}/fixture_otherworld.wasm: does not fit world task-plugin of almanac:plugin@0.5.0 or almanac:plugin@0.4.0 or almanac:plugin@0.3.0 or almanac:plugin@0.2.0 or almanac:plugin@0.1.0: "),
        format!("plugin not loaded: {dir}/fixture_badcron.wasm: task \"fixture-badcron\": invalid cron expression \"61 * * * *\""),
        format!("plugin not loaded: {dir}/zz_copy.wasm: task \"daily-points\" is already provided by {dir}/daily_points.wasm"),
    ] {
        assert!(log.contains(&line), "missing {line:?} in log:\n{log}");
    }
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_end_done_after_three_attempts_or_failed_with_the_error() {
    let db = TestDb::new().await;
    enqueue(&db, "fixture-flaky", "k1").await;
    enqueue(&db, "fixture-permanent", "k9").await;
    let plugins = plugin_dir(&["fixture_flaky", "fixture_permanent"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-flaky' AND status = 'done'", 1, Duration::from_secs(30)).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-permanent' AND status = 'failed'", 1, Duration::from_secs(30)).await;
    let (_, error, attempts) = last_error(&db, "fixture-flaky").await;
    assert_eq!((error.as_str(), attempts), ("", 3));
    // Only the successful attempt's write survived; the failed ones rolled back.
    assert_eq!(db.count("SELECT count(*) FROM fixture_flaky_effects").await, 1);
    assert_eq!(db.count("SELECT attempt::bigint FROM fixture_flaky_effects").await, 3);
    let (_, error, attempts) = last_error(&db, "fixture-permanent").await;
    assert_eq!((error.as_str(), attempts), ("account k9 is closed", 1));
    host.stop().await;
}

/// A connection dropped inside a transaction, as a panic mid-batch leaves it, is closed:
/// lent again, the next batch would run inside that transaction and its COMMIT would
/// commit what was left half done.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_dropped_inside_a_transaction_is_closed_not_lent_again() {
    let db = TestDb::new().await;
    let pool = almanac::db::Pool::new(&almanac::db::Target::new(&db.url).unwrap(), 1).unwrap();
    const PID: &str = "SELECT pg_backend_pid(), txid_current_if_assigned() IS NOT NULL";
    // A transaction that ended: the same backend is lent again.
    let conn = pool.get().await.unwrap();
    let first: i32 = conn.query_one(PID, &[]).await.unwrap().get(0);
    conn.in_transaction(true);
    conn.batch_execute("BEGIN; CREATE TEMP TABLE kept (x int); COMMIT").await.unwrap();
    conn.in_transaction(false);
    drop(conn);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.query_one(PID, &[]).await.unwrap().get::<_, i32>(0), first, "a settled connection is lent again");
    // A task that panics inside its transaction.
    let panicked = tokio::spawn(async move {
        conn.in_transaction(true);
        conn.batch_execute("BEGIN; CREATE TEMP TABLE left_behind (x int)").await.unwrap();
        assert!(conn.query_one("SELECT txid_current_if_assigned() IS NOT NULL", &[]).await.unwrap().get::<_, bool>(0));
        panic!("a bug mid-batch");
    })
    .await;
    assert!(panicked.unwrap_err().is_panic());
    let conn = pool.get().await.unwrap();
    let row = conn.query_one(PID, &[]).await.unwrap();
    assert_ne!(row.get::<_, i32>(0), first, "the connection left inside a transaction was closed");
    assert!(!row.get::<_, bool>(1), "and the new one is in no transaction");
}
