//! Plugin settings (`[tasks.X.settings]`, `env:` secrets), one truth across hosts;
//! on-demand tasks; components built against `almanac:plugin@0.1.0`.
use std::time::Duration;

use crate::support::{plugin_dir, HostProc, TestDb};

fn config(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

async fn points(db: &TestDb) -> Vec<i64> {
    db.client.query("SELECT points FROM accounts ORDER BY id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect()
}

/// A whole host's start with `file`: its exit code and log.
async fn start_fails(db: &TestDb, plugins: &std::path::Path, file: &str, env: &[(&str, &str)]) -> String {
    let mut host = HostProc::spawn_with_env(db, plugins, &["--config", file], env);
    let status = host.wait(Duration::from_secs(30)).await;
    assert!(!status.success(), "the start should stop; log:\n{}", host.log());
    host.log()
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_are_checked_at_start_and_secrets_never_shown() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_settings", "daily_points"]);
    let files = tempfile::tempdir().unwrap();

    // Missing, undeclared, unset env: the start stops, naming file and line.
    let missing = config(&files, "missing.toml", "[tasks.fixture-settings.settings]\ngreeting = \"hi\"\n");
    let log = start_fails(&db, plugins.path(), &missing, &[]).await;
    assert!(
        log.contains("\"fixture-settings\" requires setting \"api-key\" (the receiver's API key); give it in [tasks.fixture-settings.settings] of ")
            && log.contains("missing.toml:1"),
        "{log}"
    );
    let undeclared = config(&files, "undeclared.toml", "[tasks.fixture-settings.settings]\napi-key = \"k\"\ncolour = \"red\"\n");
    let log = start_fails(&db, plugins.path(), &undeclared, &[]).await;
    assert!(log.contains("undeclared.toml:3: task \"fixture-settings\" has no setting \"colour\" (it takes: greeting, api-key)"), "{log}");
    let unset = config(&files, "unset.toml", "[tasks.fixture-settings.settings]\napi-key = \"env:ALMANAC_TEST_NO_SUCH_VAR\"\n");
    let log = start_fails(&db, plugins.path(), &unset, &[]).await;
    assert!(log.contains("unset.toml:2: setting \"api-key\" of task \"fixture-settings\" reads env:ALMANAC_TEST_NO_SUCH_VAR, which is not set"), "{log}");
    let huge = "k".repeat(70_000);
    let env = config(&files, "env.toml", "[tasks.fixture-settings.settings]\napi-key = \"env:FIXTURE_API_KEY\"\n");
    let log = start_fails(&db, plugins.path(), &env, &[("FIXTURE_API_KEY", &huge)]).await;
    assert!(log.contains("env.toml:2: setting \"api-key\" of task \"fixture-settings\": the variable it reads is 70000 bytes; the limit is 65536"), "{log}");
    let bonus = config(&files, "other.toml", "[tasks.daily-points.settings]\nbonus = \"1\"\n");
    let log = start_fails(&db, plugins.path(), &bonus, &[]).await;
    assert!(log.contains("other.toml:2: task \"daily-points\" has no setting \"bonus\" (it takes: points)"), "{log}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules").await, 0, "a stopped start registered nothing");

    // A secret from the environment: the job gets it; logs, status, the dashboard and the
    // database never show it.
    let good = config(&files, "good.toml", "[tasks.fixture-settings.settings]\napi-key = \"env:FIXTURE_API_KEY\"\n");
    let secret = "s3cr3t-value-1234";
    let mut host = HostProc::spawn_with_env(&db, plugins.path(), &["--config", &good, "--listen", "127.0.0.1:0"], &[("FIXTURE_API_KEY", secret)]);
    let addr = host.listen_addr().await;
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'fixture-settings'", 1, Duration::from_secs(30)).await;
    // On demand: any instant is a slot; the slot is that instant.
    db.client.batch_execute("SELECT almanac.enqueue('fixture-settings', '2026-12-03T10:11:12.5Z', 'a')").await.unwrap();
    db.wait_count("SELECT count(*) FROM fixture_settings_seen", 1, Duration::from_secs(30)).await;
    let row = db.client.query_one("SELECT greeting, api_key, slot_label, slot_end_is_start FROM fixture_settings_seen", &[]).await.unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, String>(1), row.get::<_, String>(2), row.get::<_, bool>(3)),
        ("hello".into(), secret.into(), "2026-12-03T10:11:12.500+00:00".into(), true)
    );
    let stored: serde_json::Value = db.client.query_one("SELECT settings FROM almanac.schedules WHERE task = 'fixture-settings'", &[]).await.unwrap().get(0);
    assert_eq!(stored["greeting"], "hello");
    assert!(stored["api-key"].as_str().unwrap().starts_with("secret sha256:"), "{stored}");
    let (_, status, _) = crate::support::almanac(&db.url, &["status", "--json"]);
    let overview = reqwest::get(format!("http://{addr}/api/overview")).await.unwrap().text().await.unwrap();
    let dashboard = reqwest::get(format!("http://{addr}/")).await.unwrap().text().await.unwrap();
    let changes =
        db.client.query_one("SELECT string_agg(coalesce(before::text, '') || after::text, ' ') FROM almanac.changes", &[]).await.unwrap().get::<_, String>(0);
    for (what, text) in [("log", host.log()), ("status", status), ("overview", overview), ("dashboard", dashboard), ("changes", changes)] {
        assert!(!text.contains(secret), "the secret shows in the {what}:\n{text}");
    }
    assert!(crate::support::almanac(&db.url, &["status"]).1.contains("fixture-settings"), "an on-demand task is in status");
    host.stop().await;
}

/// `points = "25"` pays 25; a host whose file says otherwise does not serve the task;
/// an applied change is followed by the running host; a differing secret suspends it.
#[tokio::test(flavor = "multi_thread")]
async fn settings_are_one_truth_across_hosts() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    let plugins = plugin_dir(&["daily_points"]);
    let files = tempfile::tempdir().unwrap();
    let pay_25 = config(&files, "25.toml", "[tasks.daily-points.settings]\npoints = \"25\"\n");
    let pay_40 = config(&files, "40.toml", "[tasks.daily-points.settings]\npoints = \"40\"\n");
    let mut a = HostProc::spawn(&db, plugins.path(), &["--config", &pay_25]);
    db.enqueue("daily-points", "2026-03-07T16:00:00Z", &["1", "2", "3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 3, Duration::from_secs(30)).await;
    assert_eq!(points(&db).await, vec![25, 25, 25]);

    // B's file says 40: B does not serve daily-points and says why.
    let mut b = HostProc::spawn(&db, plugins.path(), &["--config", &pay_40]);
    b.wait_log("task \"daily-points\" differs from the schedule every host runs by: setting points \"25\" -> \"40\"", Duration::from_secs(30)).await;
    b.stop().await;

    // Applied: A pays 40 from its next tick on, without a restart.
    let (code, out, err) = crate::support::almanac(&db.url, &["apply", "--plugins", &plugins.path().display().to_string(), "--config", &pay_40]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("daily-points: changed: setting points \"25\" -> \"40\""), "{out}");
    a.wait_log("settings applied elsewhere; this host uses them from now on", Duration::from_secs(30)).await;
    db.enqueue("daily-points", "2026-03-08T16:00:00Z", &["1", "2", "3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 6, Duration::from_secs(30)).await;
    assert_eq!(points(&db).await, vec![65, 65, 65]);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_applied_elsewhere_suspends_the_task_on_a_host_without_it() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_settings"]);
    let files = tempfile::tempdir().unwrap();
    let file = config(&files, "almanac.toml", "[tasks.fixture-settings.settings]\napi-key = \"env:FIXTURE_API_KEY\"\n");
    let mut a = HostProc::spawn_with_env(&db, plugins.path(), &["--config", &file], &[("FIXTURE_API_KEY", "old")]);
    db.wait_count("SELECT count(*) FROM almanac.schedules", 1, Duration::from_secs(30)).await;
    let apply = std::process::Command::new(crate::support::almanac_bin())
        .args(["apply", "--plugins", &plugins.path().display().to_string(), "--config", &file])
        .env("DATABASE_URL", &db.url)
        .env("FIXTURE_API_KEY", "new")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&apply.stdout);
    assert!(apply.status.success() && out.contains("setting api-key \"secret sha256:"), "{out}");
    assert!(!out.contains("new") && !out.contains("old"), "{out}");
    a.wait_log("not served here: its setting \"api-key\" is a secret applied with another value", Duration::from_secs(30)).await;
    db.client.batch_execute("SELECT almanac.enqueue('fixture-settings', now(), 'waits')").await.unwrap();
    // A restarted with the applied secret serves it again.
    a.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'waits' AND status = 'pending'").await, 1);
    let mut a = HostProc::spawn_with_env(&db, plugins.path(), &["--config", &file], &[("FIXTURE_API_KEY", "new")]);
    db.wait_count("SELECT count(*) FROM fixture_settings_seen WHERE key = 'waits' AND api_key = 'new'", 1, Duration::from_secs(30)).await;
    a.stop().await;
}

/// A component built against almanac:plugin@0.1.0 (kept as a binary) loads and runs
/// unchanged beside 0.3.0 plugins.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_built_for_wit_0_1_0_still_loads_and_runs() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    let plugins = plugin_dir(&["fixture_permanent"]);
    let old = crate::support::workspace().join("tests/fixtures/wit-0.1.0/daily_points.wasm");
    std::fs::copy(&old, plugins.path().join("daily_points.wasm")).unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.enqueue("daily-points", "2026-03-07T16:00:00Z", &["1", "2", "3"]).await;
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["p"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 3, Duration::from_secs(30)).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 1, Duration::from_secs(30)).await;
    assert_eq!(points(&db).await, vec![10, 10, 10]);
    let settings: serde_json::Value = db.client.query_one("SELECT settings FROM almanac.schedules WHERE task = 'daily-points'", &[]).await.unwrap().get(0);
    assert_eq!(settings, serde_json::json!({}), "a 0.1.0 plugin declares no settings");
    host.stop().await;
}

/// Components built against almanac:plugin@0.2.0 (kept as a binary: it declares its
/// settings but no calls), 0.3.0 (no enqueues), 0.4.0 (no reuse) and 0.5.0 (kept likewise,
/// for when a newer version is current) load and run unchanged beside current plugins, and the published WIT files are the
/// ones they were built against, byte for byte.
#[tokio::test(flavor = "multi_thread")]
async fn plugins_built_for_older_wit_versions_still_load_and_run() {
    for version in ["0.2.0", "0.3.0", "0.4.0", "0.5.0"] {
        let db = TestDb::new().await;
        db.accounts(3).await;
        let plugins = plugin_dir(&["fixture_permanent"]);
        let old = crate::support::workspace().join(format!("tests/fixtures/wit-{version}/daily_points.wasm"));
        std::fs::copy(&old, plugins.path().join("daily_points.wasm")).unwrap();
        let mut host = HostProc::spawn(&db, plugins.path(), &[]);
        db.enqueue("daily-points", "2026-03-07T16:00:00Z", &["1", "2", "3"]).await;
        db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 3, Duration::from_secs(30)).await;
        assert_eq!(points(&db).await, vec![10, 10, 10], "{version}");
        let calls: serde_json::Value = db.client.query_one("SELECT calls FROM almanac.plugins WHERE name = 'daily-points'", &[]).await.unwrap().get(0);
        assert_eq!(calls, serde_json::json!([]), "a {version} daily-points declares no calls");
        host.stop().await;
    }
    // Each published version's WIT file, as published (SHA-256 of the file).
    use sha2::Digest;
    for (version, digest) in
        [("0.1.0", PUBLISHED_0_1_0), ("0.2.0", PUBLISHED_0_2_0), ("0.3.0", PUBLISHED_0_3_0), ("0.4.0", PUBLISHED_0_4_0), ("0.5.0", PUBLISHED_0_5_0)]
    {
        let text = std::fs::read(crate::support::workspace().join(format!("wit/{version}/almanac.wit"))).unwrap();
        assert_eq!(hex::encode(sha2::Sha256::digest(&text)), digest, "wit/{version}/almanac.wit changed: a published version never does");
    }
}

const PUBLISHED_0_1_0: &str = "4870efe681ff48334acee9df449cd3bc1e5512fa87405b1b442798be477fe505";
const PUBLISHED_0_2_0: &str = "1511907e1476df41c079c4e11fbdc76cc4ac53bffb4201a46ca336d098750e35";
/// As landed with business calendars (issue 42).
const PUBLISHED_0_3_0: &str = "5752f8cce5ba27b3d5b75f7abcc782836a22a66852e0c34e7ae50e800071a6be";
/// As landed with plugins that enqueue (issue 43).
const PUBLISHED_0_4_0: &str = "0c203f2f5dfae7af788d73ca711e2d8f216dae5cd9d420a58148bfeced080d22";
/// As landed with instances that run several jobs (issue 45); wit/almanac.wit is its text until 0.6.0.
const PUBLISHED_0_5_0: &str = "cbfd458bd22fdc2b93ddcc0f73271f6e846fd16d64dad8b8d52e006426c2d46e";
