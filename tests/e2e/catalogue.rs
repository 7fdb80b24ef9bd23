//! The bad-input catalogue: each case gets its exact, clear message, and nothing else is
//! disturbed. (Broken files in the plugins folder, traps, loops, memory bombs and
//! refused statements are in faults.rs; configuration mistakes in calendar.rs.)
use std::time::Duration;

use crate::support::{plugin_dir, HostProc, TestDb};

async fn last_error(db: &TestDb, key: &str) -> (String, String, i32) {
    let row = db.client.query_one("SELECT status, coalesce(last_error, ''), attempts FROM almanac.jobs WHERE key = $1", &[&key]).await.unwrap();
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test(flavor = "multi_thread")]
async fn sql_errors_fail_or_retry_as_their_sqlstate_says() {
    let db = TestDb::new().await;
    db.client
        .batch_execute(
            "CREATE TABLE fixture_sql_rows (id int PRIMARY KEY);
             INSERT INTO fixture_sql_rows VALUES (7);
             INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'fixture-sql', '2026-01-01T00:00:00Z', k FROM unnest(ARRAY['syntax', 'unique', 'wrong-type', 'nowait', 'swallow', 'coerce', 'float-into-int', 'inexact-float']) k;",
        )
        .await
        .unwrap();
    // Hold row 7 so `nowait` cannot lock it.
    let holder = crate::support::connect(&db.url).await;
    holder.batch_execute("BEGIN; SELECT id FROM fixture_sql_rows WHERE id = 7 FOR UPDATE").await.unwrap();
    let plugins = plugin_dir(&["fixture_sql"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--retry-base", "200ms"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 6, Duration::from_secs(30)).await;
    crate::support::wait_for("a failed attempt of nowait", Duration::from_secs(30), || async {
        db.count("SELECT count(*) FROM almanac.attempts WHERE key = 'nowait'").await >= 1
    })
    .await;

    assert_eq!(last_error(&db, "syntax").await, ("failed".into(), "database error 42601: syntax error at or near \"WHERE\"".into(), 1));
    assert_eq!(
        last_error(&db, "unique").await,
        (
            "failed".into(),
            "database error 23505: duplicate key value violates unique constraint \"fixture_sql_rows_pkey\": Key (id)=(1) already exists.".into(),
            1
        )
    );
    let (status, error, attempts) = last_error(&db, "wrong-type").await;
    assert_eq!((status.as_str(), attempts), ("failed", 1));
    assert!(error.ends_with("a text value does not fit a parameter of type int4"), "{error}");
    // Text the server parses (a date, a timestamptz, numeric, uuid, jsonb, an interval),
    // an integer for a float, a float for numeric: as node-postgres sends them.
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'coerce' AND status = 'done'", 1, Duration::from_secs(30)).await;
    // What would lose something is refused, naming both sides.
    let (status, error, _) = last_error(&db, "float-into-int").await;
    assert_eq!(status, "failed");
    assert!(error.ends_with("a float value does not fit a parameter of type int4"), "{error}");
    let (status, error, _) = last_error(&db, "inexact-float").await;
    assert_eq!(status, "failed");
    assert!(error.ends_with("9007199254740993 does not fit float8 exactly; pass it as numeric or a float"), "{error}");
    // The plugin ignored the error and returned ok; the attempt failed anyway and its
    // insert did not commit.
    assert_eq!(last_error(&db, "swallow").await, ("failed".into(), "database error 42601: syntax error at or near \"WHERE\"".into(), 1));
    assert_eq!(db.count("SELECT count(*) FROM fixture_sql_rows WHERE id IN (1, 99)").await, 0);
    // A lock that is not available is worth retrying; once released, the job succeeds.
    let (status, error, _) = last_error(&db, "nowait").await;
    assert_eq!(status, "pending");
    assert_eq!(error, "database error 55P03: could not obtain lock on row in relation \"fixture_sql_rows\"");
    holder.batch_execute("COMMIT").await.unwrap();
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'nowait' AND status = 'done'", 1, Duration::from_secs(30)).await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_mistakes_are_refused_and_the_cursor_waits() {
    let plugins = plugin_dir(&["fixture_badplan"]);
    let mut runs = Vec::new();
    for (mode, error) in [
        ("oversized", Some("returned 5001 keys for a page of 5000")),
        ("empty-key", Some("returned an empty key")),
        ("stuck", Some("returned the page after \"b\" again (paging does not advance)")),
        ("duplicates", None),
        ("huge-key", Some("returned a key of 10485760 bytes; the limit is 1024")),
        ("server-error", Some("failed: database error 22012: division by zero")),
    ] {
        let db = TestDb::new().await;
        db.client.batch_execute("CREATE TABLE fixture_badplan_mode (mode text NOT NULL)").await.unwrap();
        db.client.execute("INSERT INTO fixture_badplan_mode VALUES ($1)", &[&mode]).await.unwrap();
        let cursor: chrono::DateTime<chrono::Utc> = db
            .client
            .query_one(
                "INSERT INTO almanac.schedules (task, cron, zone, generated_through)
                 VALUES ('fixture-badplan', '* * * * *', 'UTC', date_trunc('minute', now()) - interval '2 minutes')
                 RETURNING generated_through",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let host = HostProc::spawn(&db, plugins.path(), &[]);
        runs.push((mode, error, db, host, cursor));
    }
    for (mode, error, db, mut host, cursor) in runs {
        match error {
            Some(error) => {
                host.wait_log(
                    &format!("plan of fixture-badplan for slot {}", (cursor + chrono::Duration::minutes(1)).format("%Y-%m-%dT%H:%M+00:00")),
                    Duration::from_secs(30),
                )
                .await;
                let log = host.log();
                assert!(log.contains(error), "{mode}: want {error:?} in:\n{log}");
                // The plan's fault is the task's, with its own backoff: the scheduler's
                // connection is fine and is kept.
                assert!(!log.contains("scheduler lost its database connection"), "{mode}:\n{log}");
                let now: chrono::DateTime<chrono::Utc> = db.client.query_one("SELECT generated_through FROM almanac.schedules", &[]).await.unwrap().get(0);
                assert_eq!(now, cursor, "{mode}: the cursor did not move");
                assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 0, "{mode}: no jobs");
            }
            None => {
                // The two minutes due at start; later minutes come as the checks before
                // this one take their time (a CI run crossed a minute).
                let due = format!("SELECT count(*) FROM almanac.slots WHERE jobs = 2 AND slot <= '{}'", (cursor + chrono::Duration::minutes(2)).to_rfc3339());
                db.wait_count(&due, 2, Duration::from_secs(30)).await;
                let per_slot = db.count("SELECT count(*) FROM almanac.slots WHERE jobs <> 2").await;
                assert_eq!(per_slot, 0, "duplicates collapse to one job per key");
            }
        }
        host.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_database_url_or_plugins_folder_is_a_clear_error() {
    let run = |url: &str, args: &[&str]| {
        let (code, _, stderr) = crate::support::almanac(url, args);
        (code == 0, stderr)
    };
    let (ok, err) = run("postgres://u:s3cret@host:notaport/db", &["status"]);
    assert!(!ok);
    assert_eq!(err.trim(), "error: invalid connection settings (DATABASE_URL or PG* variables): invalid connection string: invalid value for option `port`");
    let (ok, err) = run("postgres://u:s3cret@host/db?sslmode=verify-everything", &["status"]);
    assert!(!ok && err.contains("invalid sslmode \"verify-everything\""), "{err}");
    let (ok, err) = run("host=h pasword=s3cret", &["status"]);
    assert!(!ok && err.contains("invalid connection option \"pasword\""), "{err}");
    assert!(!err.contains("s3cret"), "a password is never echoed: {err}");
    let db = TestDb::new().await;
    let (ok, err) = run(&db.url, &["run", "--plugins", "/nonexistent/plugins"]);
    assert!(!ok);
    assert!(err.contains("error: cannot read plugins directory /nonexistent/plugins: No such file or directory"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_section_for_a_plugin_that_failed_to_load_or_lives_elsewhere_is_a_warning() {
    let db = TestDb::new().await;
    db.accounts(2).await;
    // Another host serves monthly-invoice: its row is in the database.
    db.schedule("monthly-invoice", "0 9 1 * *", "UTC", chrono::Utc::now()).await;
    let plugins = plugin_dir(&["daily_points"]);
    std::fs::write(plugins.path().join("cleanup_sessions.wasm"), b"\0asm\x0d\0\x01\0\xff\xff").unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("almanac.toml");
    std::fs::write(
        &config,
        "[tasks.cleanup-sessions]\npaused = true\n\n[tasks.monthly-invoice]\npaused = true\n\n[tasks.daily-points]\ncatch_up = \"latest\"\n",
    )
    .unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", config.to_str().unwrap()]);
    db.enqueue("daily-points", "2026-03-07T16:00:00Z", &["1", "2"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 2, Duration::from_secs(30)).await;
    let log = host.log();
    let dir = plugins.path().display();
    for line in [
        format!(
            "almanac.toml:1: task \"cleanup-sessions\" is not loaded here; plugin files that failed to load: {dir}/cleanup_sessions.wasm: invalid component"
        ),
        "almanac.toml:4: task \"monthly-invoice\" has no plugin in this host's folder".to_owned(),
    ] {
        assert!(log.contains(&line), "missing {line:?} in log:\n{log}");
    }
    assert!(host.is_running());
    host.stop().await;
}
