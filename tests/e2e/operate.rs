//! The operator's tools against a real host: status (and its exit code), jobs, retry,
//! prune and its horizon guard.
use std::time::Duration;

use crate::support::{plugin_dir, HostProc, TestDb};

fn almanac(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    crate::support::almanac(&db.url, args)
}

fn status_of<'a>(lines: &'a [serde_json::Value], task: &str) -> &'a serde_json::Value {
    lines.iter().find(|l| l["task"] == task).unwrap_or_else(|| panic!("no status line for {task}: {lines:?}"))
}

fn parse_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_jobs_retry_and_prune_tell_and_repair() {
    let db = TestDb::new().await;
    db.sleeper(600.0).await;
    db.enqueue("fixture-sleeper", "2026-01-01T00:00:00Z", &["s1"]).await;
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["p1"]).await;
    let (code, _, _) = almanac(&db, &["status"]);
    assert_eq!(code, 0, "nothing failed yet");

    let plugins = plugin_dir(&["fixture_sleeper", "fixture_permanent"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "2", "--shutdown-grace", "1s"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 1, Duration::from_secs(30)).await;
    let sleeping = format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND query LIKE 'SELECT pg_sleep%'", db.name);
    db.wait_count(&sleeping, 1, Duration::from_secs(30)).await;

    // status: a failed job makes the exit code 1; the sleeping job is pending and running.
    let (code, out, _) = almanac(&db, &["status", "--json"]);
    assert_eq!(code, 1);
    let lines = parse_lines(&out);
    let permanent = status_of(&lines, "fixture-permanent");
    assert_eq!((permanent["failed"].as_i64(), permanent["pending"].as_i64()), (Some(1), Some(0)));
    assert_eq!(permanent["last_error"], "account p1 is closed");
    let sleeper = status_of(&lines, "fixture-sleeper");
    assert_eq!((sleeper["pending"].as_i64(), sleeper["running"].as_i64()), (Some(1), Some(1)));
    assert!(sleeper["oldest_pending_seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(sleeper["cron"], "0 0 1 1 *");

    // jobs: the failed one with its attempts and error.
    let (code, out, _) = almanac(&db, &["jobs", "--status", "failed", "--json"]);
    assert_eq!(code, 0);
    let failed = parse_lines(&out);
    assert_eq!(failed.len(), 1);
    assert_eq!((failed[0]["task"].as_str(), failed[0]["key"].as_str(), failed[0]["attempts"].as_i64()), (Some("fixture-permanent"), Some("p1"), Some(1)));

    // The failed job's attempt history, as recorded.
    let (code, out, _) = almanac(&db, &["jobs", "--task", "fixture-permanent", "--attempts", "p1"]);
    assert_eq!(code, 0);
    let history: Vec<&str> = out.lines().collect();
    assert!(history.len() == 2 && history[1].contains(" error ") && history[1].ends_with("account p1 is closed"), "{out}");

    // A typo is no task, not "0 jobs"; an unreadable slot says which forms are read.
    let (code, _, err) = almanac(&db, &["retry", "--task", "fixture-permanet"]);
    assert_eq!(code, 1);
    assert!(err.contains("no task \"fixture-permanet\": no host has registered it (known: fixture-permanent, fixture-sleeper)"), "{err}");
    let (code, _, err) = almanac(&db, &["retry", "--task", "fixture-permanent", "--slot", "01/01/2026"]);
    assert!(code == 1 && err.contains("--slot") && err.contains("UTC as `almanac jobs` prints it (2026-10-01 07:00:00)"), "{err}");
    // A range of slots narrows a retry: the job's is 1 January, in the task's zone (UTC here).
    let (code, _, err) = almanac(&db, &["retry", "--task", "fixture-permanent", "--from", "2026-01-02", "--to", "2026-02-01"]);
    assert_eq!((code, err.trim()), (1, r#"error: no failed job of fixture-permanent matched from "2026-01-02" to "2026-02-01""#));
    let (code, _, err) = almanac(&db, &["retry", "--task", "fixture-permanent", "--slot", "2026-01-01", "--from", "2026-01-01"]);
    assert!(code == 2 && err.contains("cannot be used with"), "{err}");
    // retry: back to pending with fresh attempts; it fails again and both attempts are kept.
    // The slot as `almanac jobs` printed it.
    let (code, out, _) = almanac(&db, &["retry", "--task", "fixture-permanent", "--slot", "2026-01-01 00:00:00", "--key", "p1"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "1 failed job(s) of fixture-permanent back to pending; their earlier attempts stay in almanac.attempts");
    db.wait_count("SELECT count(*) FROM almanac.attempts WHERE key = 'p1'", 2, Duration::from_secs(30)).await;
    // Each names the host whose claim held the job.
    assert_eq!(db.count("SELECT count(*) FROM almanac.attempts WHERE key = 'p1' AND host IN (SELECT id FROM almanac.hosts)").await, 2);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'p1' AND status = 'failed' AND retries = 1 AND attempts = 1", 1, Duration::from_secs(30))
        .await;
    host.stop().await;

    // prune: inside the 30-day default horizon it refuses and deletes nothing.
    db.client
        .batch_execute(
            "INSERT INTO almanac.jobs (task, slot, key, status, completed_at) VALUES
                 ('fixture-permanent', '2020-01-01T00:00:00Z', 'old', 'done', '2020-01-02T00:00:00Z'),
                 ('fixture-permanent', now() - interval '2 days', 'recent', 'done', now() - interval '2 days');",
        )
        .await
        .unwrap();
    let (code, _, err) = almanac(&db, &["prune", "--older-than", "10d"]);
    assert_eq!(code, 1);
    assert!(err.contains("refusing to prune: 10d is inside the backfill horizon of task fixture-permanent (30d)"), "{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'").await, 2);
    let (code, out, _) = almanac(&db, &["prune", "--older-than", "400d"]);
    assert_eq!(code, 0);
    // 2020 is outside the month partitions (5 years back at most): its row waited in the
    // default partition and is deleted there, one by one.
    assert_eq!(
        out.trim(),
        "pruned slots older than 400d: 0 month partition(s) dropped (0 done job(s)), 1 done or discarded job(s) deleted from the default partition\n\
         pruned outbox messages created before then: 0 month partition(s) dropped (0 delivered message(s)), 0 delivered message(s) deleted from the default partition"
    );
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'recent'").await, 1);
    // The text table: a long key widens its column, so every row's STATUS lines up.
    db.client
        .batch_execute(
            "INSERT INTO almanac.jobs (task, slot, key, status)
             SELECT task, slot, 'a-key-much-longer-than-sixteen-characters', 'discarded' FROM almanac.jobs WHERE key = 'recent'",
        )
        .await
        .unwrap();
    let (code, out, _) = almanac(&db, &["jobs", "--task", "fixture-permanent"]);
    assert_eq!(code, 0);
    let at = |line: &str| [" STATUS", " failed", " discarded", " done"].iter().find_map(|s| line.find(s));
    let columns: Vec<Option<usize>> = out.lines().map(at).collect();
    assert!(columns.len() >= 4 && columns.iter().all(|c| *c == columns[0] && c.is_some()), "{out}");
    db.counts_agree().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn psql_reaches_the_private_cluster_and_stop_stops_it() {
    let dir = tempfile::Builder::new().prefix("almanac-psql-").tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(crate::support::almanac_bin())
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env_remove("DATABASE_URL")
            .env_remove("PGHOST")
            .env_remove("PGDATABASE")
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, out, err) = run(&["psql", "--", "-Atc", "SELECT current_database()"]);
    let cluster = almanac::cluster::Cluster::new(&dir.path().join("pg")).unwrap();
    assert_eq!((code, out.trim()), (0, "almanac"), "{err}");
    assert!(cluster.is_running());
    // Its database has Almanac's tables from the first command on.
    let (code, out, err) = run(&["status"]);
    assert!(code == 0 && out.starts_with("TASK"), "{out}{err}");
    // A copy of the running cluster's directory is named for what it is, not taken for
    // that server.
    let copy = tempfile::Builder::new().prefix("almanac-copy-").tempdir().unwrap();
    let copied = std::process::Command::new("cp").arg("-a").arg(dir.path().join("pg")).arg(copy.path()).status().unwrap();
    assert!(copied.success());
    let out = std::process::Command::new(crate::support::almanac_bin())
        .arg("--data-dir")
        .arg(copy.path())
        .args(["status"])
        .env_remove("DATABASE_URL")
        .env_remove("PGHOST")
        .env_remove("PGDATABASE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("postmaster.pid was written by the server of another data directory"), "{err}");
    assert!(err.contains(&dir.path().join("pg").canonicalize().unwrap().display().to_string()), "{err}");
    // The README's demo on the private cluster: it says the cluster keeps running, and how to stop it.
    let plugins = crate::support::plugin_dir(&["daily_points"]);
    let (code, out, err) = run(&["demo", "--plugins", &plugins.path().display().to_string(), "--accounts", "20", "--days", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("every one of 20 accounts has exactly +20 points"), "{out}");
    let stop = format!("`almanac --data-dir {} stop` stops it.", dir.path().display());
    assert!(out.contains("keeps running for the next command") && out.trim_end().ends_with(&stop), "{out}");
    let (code, out, _) = run(&["stop"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("stopped the private cluster"), "{out}");
    assert!(!cluster.is_running());
    let (_, out, _) = run(&["stop"]);
    assert!(out.contains("is not running"), "{out}");
    let _ = std::fs::remove_dir_all(&cluster.socket_dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn enqueue_refuses_unknown_tasks_and_off_calendar_slots_and_holds_future_ones() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", chrono::Utc::now()).await;
    let (code, _, err) = almanac(&db, &["enqueue", "daily-points-typo", "--slot", "2026-03-08", "--key", "1"]);
    assert!(code != 0 && err.contains("no task \"daily-points-typo\"") && err.contains("daily-points"), "{err}");
    // Midnight in Shanghai is 16:00 UTC; 10:00 UTC is between two slots.
    let (code, _, err) = almanac(&db, &["enqueue", "daily-points", "--slot", "2026-03-08T10:00:00Z", "--key", "1"]);
    assert!(code != 0 && err.contains("is not on daily-points's calendar") && err.contains("--off-calendar"), "{err}");
    let (code, out, err) = almanac(&db, &["enqueue", "daily-points", "--slot", "2026-03-08T10:00:00Z", "--key", "1", "--off-calendar"]);
    assert_eq!((code, out.trim()), (0, "enqueued"), "{err}");
    let (code, _, err) = almanac(&db, &["enqueue", "daily-points", "--slot", "2026-03-08", "--key", "2", "--payload", "{not json"]);
    assert!(code != 0 && err.contains("--payload is not JSON"), "{err}");
    let (code, out, err) = almanac(&db, &["enqueue", "daily-points", "--slot", "2030-01-01", "--key", "3", "--payload", r#"{"why":"test"}"#]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("enqueued; it runs from 2029-12-31 16:00:00Z"), "{out}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = '3' AND payload = '{\"why\":\"test\"}' AND run_after = slot").await, 1);

    // A host runs the present job and leaves the future one alone.
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = '1' AND status = 'done'", 1, Duration::from_secs(30)).await;
    // Its workers have polled since (a claim sees every due row), and key 3 is still waiting.
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = '1' AND completed_at < now() - interval '1 second'", 1, Duration::from_secs(10)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = '3' AND status = 'pending' AND attempts = 0").await, 1);
    host.stop().await;
}
