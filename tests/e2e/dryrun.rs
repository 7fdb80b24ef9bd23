//! `almanac try` / `almanac plan`: a plugin's call against the real database, every
//! statement shown, and nothing kept unless `--commit`.
use crate::support::{plugin_dir, TestDb};

async fn state(db: &TestDb) -> (Vec<i64>, bool, i64) {
    let points = db.client.query("SELECT points FROM accounts ORDER BY id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let ledger = db.client.query_one("SELECT to_regclass('points_ledger') IS NOT NULL", &[]).await.unwrap().get(0);
    let almanac = db.count("SELECT (SELECT count(*) FROM almanac.jobs) + (SELECT count(*) FROM almanac.schedules) + (SELECT count(*) FROM almanac.plugins) + (SELECT count(*) FROM almanac.outbox)").await;
    (points, ledger, almanac)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_shows_every_statement_and_keeps_nothing_without_commit() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    let plugins = plugin_dir(&["daily_points"]);
    let dir = plugins.path().display().to_string();
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("almanac.toml");
    std::fs::write(&config, "[tasks.daily-points.settings]\npoints = \"25\"\n").unwrap();
    let config = config.display().to_string();
    let almanac = |args: &[&str]| crate::support::almanac(&db.url, args);
    let before = state(&db).await;
    assert_eq!(before, (vec![0, 0, 0], false, 0));

    let (code, out, err) = almanac(&["try", "daily-points", "--slot", "2026-03-08", "--key", "2", "--plugins", &dir, "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("try daily-points slot 2026-03-07T16:00:00Z key \"2\""), "{out}");
    assert!(out.contains("plugin INSERT INTO points_ledger (task, period, account_id, points, slot) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING  [\"daily-points\", \"2026-03-08\", 2, 25, 2026-03-07T16:00:00Z]"), "{out}");
    assert!(out.contains("plugin UPDATE accounts SET points = points + $2 WHERE id = $1  [2, 25]"), "{out}");
    assert_eq!(out.matches("-> 1 row(s) affected").count(), 2, "{out}");
    assert!(out.contains("outcome: ok (the job would be done) in") && out.contains("rolled back: nothing was kept"), "{out}");
    assert_eq!(state(&db).await, before, "a dry run without --commit left something behind");

    // An on-demand task has no plan: said, rather than an empty list of keys.
    let on_demand = plugin_dir(&["fixture_settings"]);
    let settings = files.path().join("on-demand.toml");
    std::fs::write(&settings, "[tasks.fixture-settings.settings]\napi-key = \"k\"\n").unwrap();
    let (code, out, err) = almanac(&[
        "plan",
        "fixture-settings",
        "--slot",
        "2026-03-08T00:00:00Z",
        "--plugins",
        &on_demand.path().display().to_string(),
        "--config",
        &settings.display().to_string(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("task \"fixture-settings\" runs on demand: it has no schedule, so nothing plans its jobs") && !out.contains("keys ("), "{out}{err}");

    let (code, out, _) = almanac(&["plan", "daily-points", "--slot", "2026-03-08", "--limit", "2", "--plugins", &dir]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("plugin SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2  [-9223372036854775808, 2]\n      -> 2 row(s)"), "{out}");
    assert!(out.contains("keys (2):\n  key: 1\n  key: 2\n"), "{out}");
    assert_eq!(state(&db).await, before);

    // A failing job: its error, exit 1, nothing kept.
    let (code, out, _) = almanac(&["try", "daily-points", "--slot", "2026-03-08", "--key", "not-a-number", "--plugins", &dir]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("outcome: failed in") && out.contains("invalid digit found in string"), "{out}");
    assert_eq!(state(&db).await, before);

    // --commit keeps the job's effect (and the plugin's table), and still no job row.
    let (code, out, _) = almanac(&["try", "daily-points", "--slot", "2026-03-08", "--key", "1", "--plugins", &dir, "--commit"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("committed"), "{out}");
    assert_eq!(state(&db).await, (vec![10, 0, 0], true, 0));

    // A publish is shown as the message the receiver would get: topic, key, its JSON.
    let notify = plugin_dir(&["points_notify"]);
    db.configured_topic("points-awarded").await;
    let (code, out, err) = almanac(&["try", "points-notify", "--slot", "2026-03-08", "--key", "3", "--plugins", &notify.path().display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(r#"outbox publish on "points-awarded" key "points-notify/2026-03-08/3" as "application/json": "{\"task\":\"points-notify\",\"period\":\"2026-03-08\""#),
        "{out}"
    );
}

/// A plugin that sends statements without end cannot grow a dry run's memory: the first
/// 1,000 are shown, the rest counted. `--plugins` may name one component file.
#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_keeps_the_first_thousand_statements_and_counts_the_rest() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_sql"]);
    let file = plugins.path().join("fixture_sql.wasm").display().to_string();
    let (code, out, err) = crate::support::almanac(&db.url, &["try", "fixture-sql", "--slot", "2026-01-01", "--key", "many", "--plugins", &file]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("\n  1000 plugin SELECT $1::int  [999]\n"), "{out}");
    assert!(!out.contains("  1001 plugin"), "{out}");
    assert!(out.contains("  ... and 4000 more statement(s), not shown (a dry run keeps the first 1000)\noutcome: ok"), "{out}");
    // A statement's parameters: the first 100 shown, the rest counted.
    let (code, out, err) = crate::support::almanac(&db.url, &["try", "fixture-sql", "--slot", "2026-01-01", "--key", "wide", "--plugins", &file]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("plugin SELECT $1::int  [0, 1, 2,") && out.contains(", 98, 99, … 400 more]\n      -> error: "), "{out}");
    let (code, _, err) = crate::support::almanac(&db.url, &["try", "fixture-sql", "--slot", "2026-01-01", "--key", "many", "--plugins", "/no/such/file.wasm"]);
    assert!(code == 1 && err.contains("/no/such/file.wasm does not exist: give --plugins a folder of components or one .wasm file"), "{err}");
}
