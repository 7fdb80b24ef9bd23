//! One truth for schedules: a schedule changes only deliberately (`apply`, `cursor`,
//! `pause`, `forget`), every change is recorded, running hosts follow it, and a host
//! starting with another file changes nothing. Jobs are retired with `discard`.
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::support::{plugin_dir, HostProc, TestDb};

fn almanac(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    crate::support::almanac(&db.url, args)
}

fn write_config(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

async fn stored_cron(db: &TestDb) -> String {
    db.client.query_one("SELECT cron FROM almanac.schedules WHERE task = 'fixture-minutely'", &[]).await.unwrap().get(0)
}

/// The typo of the report: a host started with another file must not reschedule every
/// host; `apply` does, recorded; the running host follows without a restart, the new
/// calendar takes over where the last slot of the old one ends, and the host restarted
/// with the old file does not flip it back.
#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_changes_only_when_applied_and_running_hosts_follow() {
    let db = TestDb::new().await;
    let files = tempfile::tempdir().unwrap();
    let every_10s = write_config(&files, "a.toml", "[tasks.fixture-minutely]\ncron = \"*/10 * * * * *\"\n");
    let every_3s = write_config(&files, "b.toml", "[tasks.fixture-minutely]\ncron = \"*/3 * * * * *\"\n");
    let plugins = plugin_dir(&["fixture_minutely"]);
    let mut a = HostProc::spawn(&db, plugins.path(), &["--config", &every_10s]);
    db.wait_count("SELECT count(*) FROM almanac.slots WHERE status = 'generated'", 1, Duration::from_secs(30)).await;

    // Host B starts with the other file: it does not serve the task, and changes nothing.
    let others = plugin_dir(&["fixture_minutely", "fixture_permanent"]);
    let mut b = HostProc::spawn(&db, others.path(), &["--config", &every_3s]);
    b.wait_log("task \"fixture-minutely\" differs from the schedule every host runs by", Duration::from_secs(30)).await;
    let log = b.log();
    // The difference first, in one line; then where each side comes from.
    assert!(
        log.contains("task \"fixture-minutely\" differs from the schedule every host runs by: cron \"*/10 * * * * *\" -> \"*/3 * * * * *\" (stored -> here)"),
        "{log}"
    );
    assert!(log.contains("Here: ") && log.contains("b.toml:1") && log.contains("stored (register by"), "{log}");
    assert!(log.contains("`almanac apply` with this file"), "{log}");
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["p"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-permanent' AND status = 'failed'", 1, Duration::from_secs(30)).await;
    assert!(b.is_running(), "B serves its other task");
    assert_eq!(stored_cron(&db).await, "*/10 * * * * *");
    assert_eq!(db.count("SELECT count(*) FROM almanac.changes WHERE task = 'fixture-minutely'").await, 1, "only A's registration is recorded");

    // A dry run says what would change and changes nothing.
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &plugins.path().display().to_string(), "--config", &every_3s, "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fixture-minutely: would change: cron \"*/10 * * * * *\" -> \"*/3 * * * * *\""), "{out}");
    assert_eq!(stored_cron(&db).await, "*/10 * * * * *");
    // Nothing means nothing: a task no host has is not set up by a dry run (no table of
    // its setup, no role, no almanac.plugins row, no schedule).
    let fresh = plugin_dir(&["fixture_minutely", "daily_points"]);
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &fresh.path().display().to_string(), "--config", &every_3s, "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("daily-points: would register"), "{out}");
    assert!(!err.contains("schedule registered"), "a dry run registers nothing, and says nothing of it:\n{err}");
    // (Task roles are the cluster's and other tests make daily-points' one; its login is
    // this database's own.)
    let login = almanac::login::login_name("daily-points", &db.name);
    assert_eq!(db.count(&format!("SELECT count(*) FROM pg_roles WHERE rolname = '{login}'")).await, 0);
    assert_eq!(db.count("SELECT count(*) FROM almanac.plugin_logins WHERE task = 'daily-points'").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM pg_class WHERE relname = 'points_ledger'").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM almanac.plugins WHERE name = 'daily-points'").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points'").await, 0);

    // Applied: recorded with who, from what, to what; A follows.
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &plugins.path().display().to_string(), "--config", &every_3s, "--reason", "faster demo"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fixture-minutely: changed: cron \"*/10 * * * * *\" -> \"*/3 * * * * *\""), "{out}");
    assert_eq!(stored_cron(&db).await, "*/3 * * * * *");
    let change = db.client.query_one("SELECT before, after, by_role, origin, reason FROM almanac.changes WHERE action = 'apply'", &[]).await.unwrap();
    let (before, after): (serde_json::Value, serde_json::Value) = (change.get(0), change.get(1));
    assert_eq!((before["cron"].as_str(), after["cron"].as_str()), (Some("*/10 * * * * *"), Some("*/3 * * * * *")));
    assert!(change.get::<_, String>(3).starts_with("almanac apply on "));
    assert_eq!(change.get::<_, Option<String>>(4).as_deref(), Some("faster demo"));
    a.wait_log("schedule changed; this host follows it", Duration::from_secs(30)).await;
    assert!(a.log().contains("action=apply") && a.log().contains("reason=\"faster demo\""), "{}", a.log());
    // B's file agrees now: B serves the task without a restart.
    b.wait_log("plugin loaded task=fixture-minutely", Duration::from_secs(30)).await;
    assert!(b.log().contains("the stored schedule this file disagreed with changed: trying it again"), "{}", b.log());

    // The old calendar's last slot covers [from, end): nothing of the new one starts
    // inside it; the new one runs from `end` on.
    let moved: Option<(DateTime<Utc>, DateTime<Utc>)> =
        before["cursor"].as_str().map(|f| (f.parse().unwrap(), after["cursor"].as_str().unwrap().parse().unwrap()));
    let (from, to) = moved.expect("the cursor was a generated slot, so the new calendar takes over at its end");
    assert!(to > from && to < from + chrono::Duration::seconds(10), "{from} -> {to}");
    let end = from + chrono::Duration::seconds(10);
    db.wait_count(&format!("SELECT count(*) FROM almanac.slots WHERE slot >= '{}'", end.to_rfc3339()), 2, Duration::from_secs(30)).await;
    let inside = format!("SELECT count(*) FROM almanac.slots WHERE slot > '{}' AND slot < '{}'", from.to_rfc3339(), end.to_rfc3339());
    assert_eq!(db.count(&inside).await, 0, "a slot of the new calendar inside the old one's last slot");

    // A restarted with its old file does not flip the schedule back.
    a.stop().await;
    let mut a = HostProc::spawn(&db, plugins.path(), &["--config", &every_10s]);
    a.wait_log("task \"fixture-minutely\" differs from the schedule every host runs by", Duration::from_secs(30)).await;
    assert_eq!(stored_cron(&db).await, "*/3 * * * * *");
    assert_eq!(db.count("SELECT count(*) FROM almanac.changes WHERE task = 'fixture-minutely'").await, 2);
    a.stop().await;
    b.stop().await;
}

/// `cursor`, `pause`, `discard` and `forget`: each recorded; a discarded job never runs
/// and still stops its identity from being created again.
#[tokio::test(flavor = "multi_thread")]
async fn cursor_pause_discard_and_forget_are_recorded() {
    let db = TestDb::new().await;
    db.schedule("fixture-minutely", "* * * * *", "UTC", Utc::now()).await;
    let (code, out, err) = almanac(&db, &["cursor", "fixture-minutely", "--to", "2026-11-01", "--reason", "replay november"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cursor ") && out.contains("-> 2026-11-01T00:00:00Z; the next slot generated is 2026-11-01T00:01+00:00"), "{out}");
    let (code, _, err) = almanac(&db, &["cursor", "fixture-minutely", "--to", "yesterday-ish"]);
    assert!(code == 1 && err.contains("--to") && err.contains("RFC 3339"), "{err}");
    let (code, _, err) = almanac(&db, &["cursor", "fixture-minutly", "--to", "now"]);
    assert!(code == 1 && err.contains("no task \"fixture-minutly\""), "{err}");
    assert_eq!(
        almanac(&db, &["pause", "fixture-minutely", "--reason", "audit"]).1.trim(),
        "fixture-minutely paused: no new slots are generated; jobs already generated or enqueued still run (`almanac hold fixture-minutely` stops them)"
    );
    assert_eq!(almanac(&db, &["pause", "fixture-minutely"]).1.trim(), "fixture-minutely already paused (nothing recorded)");
    let actions: Vec<(String, Option<String>)> =
        db.client.query("SELECT action, reason FROM almanac.changes ORDER BY id", &[]).await.unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(actions, vec![("cursor".into(), Some("replay november".into())), ("pause".into(), Some("audit".into()))]);

    // Discard one of two pending jobs: the host (schedule paused) runs only the other.
    db.enqueue("fixture-minutely", "2026-11-01T00:01:00Z", &["keep", "drop"]).await;
    let (code, _, err) = almanac(&db, &["discard", "--task", "fixture-minutely", "--reason", "x"]);
    assert!(code == 1 && err.contains("say which jobs"), "{err}");
    let (code, out, err) = almanac(&db, &["discard", "--task", "fixture-minutely", "--key", "drop", "--reason", "customer left"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("1 pending or failed job(s) of fixture-minutely discarded"), "{out}");
    let plugins = plugin_dir(&["fixture_minutely"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'keep' AND status = 'done'", 1, Duration::from_secs(30)).await;
    host.stop().await;
    let row = db.client.query_one("SELECT status, attempts, last_error FROM almanac.jobs WHERE key = 'drop'", &[]).await.unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i32>(1), row.get::<_, String>(2)), ("discarded".into(), 0, "discarded: customer left".into()));
    let (code, _, err) = almanac(&db, &["discard", "--task", "fixture-minutely", "--key", "drop", "--reason", "again"]);
    assert!(code == 1 && err.contains("nothing discarded: no pending or failed job of fixture-minutely matched key \"drop\""), "{err}");
    let (code, _, err) = almanac(&db, &["retry", "--task", "fixture-minutely", "--key", "drop"]);
    assert!(code == 1 && err.contains("no failed job of fixture-minutely matched key \"drop\""), "{err}");
    let (_, out, _) = almanac(&db, &["enqueue", "fixture-minutely", "--slot", "2026-11-01T00:01:00Z", "--key", "drop"]);
    assert_eq!(out.trim(), "already present (no-op)");
    // What an application connects with: the database the CLI uses.
    let (code, out, err) = almanac(&db, &["url"]);
    assert_eq!(code, 0, "{err}");
    let app = crate::support::connect(out.trim()).await;
    let name: String = app.query_one("SELECT current_database()", &[]).await.unwrap().get(0);
    assert!(db.url.contains(&format!("dbname={name}")), "{out} leads to {name}");
    // The CLI refuses what almanac.enqueue refuses: it goes through it.
    let long = "k".repeat(1536);
    let (code, _, err) = almanac(&db, &["enqueue", "fixture-minutely", "--slot", "2026-11-01T00:01:00Z", "--key", &long]);
    assert!(code == 1 && err.contains("1536 bytes"), "{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE length(key) > 1024").await, 0);
    let (_, out, _) = almanac(&db, &["status", "--json"]);
    let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!((line["discarded"].as_i64(), line["done"].as_i64(), line["pending"].as_i64()), (Some(1), Some(1), Some(0)));

    // A follow-up three days out, and one at a given instant: not run before then.
    let (code, out, err) = almanac(&db, &["enqueue", "fixture-minutely", "--slot", "2026-11-01T00:01:00Z", "--key", "dunning", "--run-after", "3d"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("enqueued; it runs from "), "{out}");
    assert_eq!(
        db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'dunning' AND run_after BETWEEN now() + interval '71 hours' AND now() + interval '73 hours'")
            .await,
        1
    );
    let (code, _, err) = almanac(&db, &["enqueue", "fixture-minutely", "--slot", "2026-11-01T00:01:00Z", "--key", "at", "--run-after", "2030-01-02T03:04:05Z"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'at' AND run_after = '2030-01-02T03:04:05Z'").await, 1);
    let (code, _, err) = almanac(&db, &["enqueue", "fixture-minutely", "--slot", "2026-11-01T00:01:00Z", "--key", "bad", "--run-after", "soon"]);
    assert!(code == 2 && err.contains("neither an RFC 3339 instant nor a duration"), "{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.changes WHERE action = 'enqueue' AND after->>'key' IN ('dunning', 'at')").await, 2);
    // `jobs` finds them by key (exact or prefix) and says when each is due.
    let (code, out, err) = almanac(&db, &["jobs", "--key", "at"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() == 2 && lines[0].contains("DUE (UTC)") && lines[1].contains(" at ") && lines[1].contains("2030-01-02 03:04:05"), "{out}");
    let (_, out, _) = almanac(&db, &["jobs", "--key-prefix", "dun", "--json"]);
    let keys: Vec<String> = out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["key"].as_str().unwrap().to_owned()).collect();
    assert_eq!(keys, ["dunning"], "{out}");
    // Forget: refused while a job is open, then done with --discard-pending.
    db.enqueue("fixture-minutely", "2026-11-01T00:02:00Z", &["late"]).await;
    let (code, _, err) = almanac(&db, &["forget", "fixture-minutely"]);
    assert!(code == 1 && err.contains("fixture-minutely has 3 pending or failed job(s): give --discard-pending"), "{err}");
    let (code, out, err) = almanac(&db, &["forget", "fixture-minutely", "--discard-pending", "--reason", "retired"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fixture-minutely forgotten") && out.contains("(3 job(s) discarded"), "{out}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'discarded'").await, 4);
    assert_eq!(db.count("SELECT count(*) FROM almanac.changes WHERE action = 'forget' AND before->>'cron' = '* * * * *'").await, 1);
    let (code, _, err) = almanac(&db, &["enqueue", "fixture-minutely", "--slot", "2026-11-01T00:03:00Z", "--key", "k"]);
    assert!(code == 1 && err.contains("no task \"fixture-minutely\""), "{err}");
}

/// `backfill --config` with a folder holding only some tasks: the others' sections are
/// warnings; and a backfill never generates by a calendar other than the stored one.
#[tokio::test(flavor = "multi_thread")]
async fn backfill_takes_a_partial_folder_and_only_the_stored_calendar() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_minutely"]);
    std::fs::write(plugins.path().join("cleanup_sessions.wasm"), b"\0asm\x0d\0\x01\0\xff\xff").unwrap();
    let files = tempfile::tempdir().unwrap();
    let config = write_config(&files, "almanac.toml", "[tasks.cleanup-sessions]\npaused = true\n\n[tasks.fixture-minutely]\ncatch_up = \"all\"\n");
    let dir = plugins.path().display().to_string();
    let backfill = |extra: &[&str]| {
        let mut args =
            vec!["backfill", "fixture-minutely", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-01T00:05:00Z", "--plugins", &dir, "--config", &config];
        args.extend_from_slice(extra);
        almanac(&db, &args)
    };
    let (code, out, err) = backfill(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 5 periods generated, 5 new jobs"), "{out}");
    assert!(err.contains("task \"cleanup-sessions\" is not loaded here; plugin files that failed to load"), "{err}");

    // Another calendar stored for the task: the backfill refuses rather than mix two.
    db.schedule("fixture-minutely", "*/5 * * * *", "UTC", Utc::now()).await;
    let (code, _, err) = backfill(&[]);
    assert_eq!(code, 1);
    assert!(err.contains("this folder and file say cron \"* * * * *\" in UTC, but the schedule every host runs by is cron \"*/5 * * * *\" in UTC"), "{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 5);
}
