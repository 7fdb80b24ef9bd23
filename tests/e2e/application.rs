//! Applications hand work to Almanac in their own transactions: `almanac.enqueue` and
//! `enqueue_many` from a login role granted only `almanac_client`.
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::Client;

use crate::support::{plugin_dir, HostProc, TestDb};

/// A login role granted `almanac_client` and nothing else, and a connection as it.
async fn application(db: &TestDb) -> Client {
    let role = format!("{}_app", db.name);
    db.client.batch_execute(&format!("CREATE ROLE {role} LOGIN IN ROLE almanac_client")).await.unwrap();
    let url = format!("{} user={role}", db.url);
    crate::support::connect(&url).await
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_default()
}

fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| format!("{} (hint: {})", d.message(), d.hint().unwrap_or("-"))).unwrap_or_else(|| e.to_string())
}

/// The statement's error, run in a transaction rolled back afterwards.
async fn refused(app: &Client, sql: &str) -> (String, String) {
    app.batch_execute("BEGIN").await.unwrap();
    let e = app.query(sql, &[]).await.expect_err(sql);
    app.batch_execute("ROLLBACK").await.unwrap();
    (sqlstate(&e), message(&e))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_application_enqueues_in_its_own_transaction() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_attacker"]);
    // A long poll interval: a job that runs promptly was woken by the notification.
    let mut host = HostProc::spawn(&db, plugins.path(), &["--poll-interval", "1h"]);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE calendar IS NOT NULL", 1, Duration::from_secs(30)).await;
    let app = application(&db).await;
    let slot = "'2026-01-01T00:00:00Z'";
    let step = r#"[{"execute": "UPDATE fixture_attacker_effects SET note = 'from the payload' WHERE key = 'paid'"}]"#;

    // Rolled back: nothing exists, nothing runs.
    app.batch_execute(&format!("BEGIN; SELECT almanac.enqueue('fixture-attacker', {slot}, 'gone', $p${step}$p$); ROLLBACK")).await.unwrap();
    // Committed with the application's own work: runs once, with its payload.
    app.batch_execute("BEGIN").await.unwrap();
    let created: bool = app.query_one(&format!("SELECT almanac.enqueue('fixture-attacker', {slot}, 'paid', $p${step}$p$)"), &[]).await.unwrap().get(0);
    app.batch_execute("COMMIT").await.unwrap();
    assert!(created);
    db.wait_count("SELECT count(*) FROM fixture_attacker_effects WHERE key = 'paid' AND note = 'from the payload'", 1, Duration::from_secs(10)).await;
    let again: bool = app.query_one(&format!("SELECT almanac.enqueue('fixture-attacker', {slot}, 'paid')"), &[]).await.unwrap().get(0);
    assert!(!again, "the same identity twice is a no-op");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'gone'").await, 0);

    // 10,000 keys in one call; the second call creates none.
    let keys = "ARRAY(SELECT 'many-' || g FROM generate_series(1, 10000) g)";
    let n: i32 = app.query_one(&format!("SELECT almanac.enqueue_many('fixture-attacker', {slot}, {keys})"), &[]).await.unwrap().get(0);
    assert_eq!(n, 10_000);
    let n: i32 =
        app.query_one(&format!("SELECT almanac.enqueue_many('fixture-attacker', {slot}, {keys} || ARRAY['many-x', 'many-x'])"), &[]).await.unwrap().get(0);
    assert_eq!(n, 1, "existing keys and repeats are no-ops");
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key LIKE 'many-%' AND status = 'done'", 10_001, Duration::from_secs(120)).await;

    // A future slot waits for its start; an off-calendar slot needs asking.
    let (code, text) = refused(&app, "SELECT almanac.enqueue('fixture-attacker', '2026-06-01T00:00:00Z', 'k')").await;
    assert_eq!(code, "22023");
    assert!(
        text.contains("slot 2026-06-01 00:00:00+00 (2026-06-01 00:00:00 in UTC) is not on task \"fixture-attacker\"'s calendar (cron \"0 0 1 1 *\")"),
        "{text}"
    );
    assert!(text.contains("off_calendar => true"), "{text}");
    let created: bool =
        app.query_one("SELECT almanac.enqueue('fixture-attacker', '2027-06-01T00:00:00Z', 'later', off_calendar => true)", &[]).await.unwrap().get(0);
    assert!(created);
    let waits: DateTime<Utc> = db.client.query_one("SELECT run_after FROM almanac.jobs WHERE key = 'later'", &[]).await.unwrap().get(0);
    assert_eq!(waits.to_rfc3339(), "2027-06-01T00:00:00+00:00");

    // Clear refusals, each with its SQLSTATE.
    for (sql, code, text) in [
        (
            "SELECT almanac.enqueue('nope', '2026-01-01T00:00:00Z', 'k')",
            "42704",
            "no task \"nope\": no host has registered it (hint: known tasks: fixture-attacker)",
        ),
        ("SELECT almanac.enqueue('fixture-attacker', '2026-01-01T00:00:00Z', '')", "22023", "key must not be empty"),
        ("SELECT almanac.enqueue('fixture-attacker', NULL, 'k')", "22004", "slot must not be NULL"),
        ("SELECT almanac.enqueue(NULL, '2026-01-01T00:00:00Z', 'k')", "22004", "task must not be NULL"),
        ("SELECT almanac.enqueue('fixture-attacker', '2026-01-01T00:00:00Z', 'k', 'not json')", "22P02", "invalid input syntax for type json"),
        ("SELECT almanac.enqueue_many('fixture-attacker', '2026-01-01T00:00:00Z', ARRAY['a', NULL])", "22004", "key must not be NULL"),
        ("SELECT almanac.enqueue('fixture-attacker', '2026-01-01T00:00:00Z', repeat('k', 1025))", "22023", "a key of 1025 bytes; the limit is 1024"),
        ("SELECT almanac.enqueue('fixture-attacker', '2020-01-01T00:00:00Z', 'k')", "22023", "outside the calendar window"),
        (
            "SELECT almanac.enqueue('fixture-attacker', '2026-01-01T00:00:00Z', 'k', jsonb_build_object('x', repeat('x', 1048576)))",
            "22023",
            "almanac.enqueue: a payload of 1048585 bytes; the limit is 1048576 (1 MiB)",
        ),
        (
            "SELECT almanac.enqueue_many('fixture-attacker', '2026-01-01T00:00:00Z', ARRAY['k'], jsonb_build_object('x', repeat('x', 1048576)))",
            "22023",
            "the limit is 1048576 (1 MiB)",
        ),
        // Instants the host could not read back (every claim reaching the row would fail),
        // refused with the range named before the table's own check would.
        ("SELECT almanac.enqueue('fixture-attacker', '-infinity', 'k', off_calendar => true)", "22023", "slot -infinity is outside years 1 to 9999"),
        ("SELECT almanac.enqueue('fixture-attacker', 'infinity', 'k', off_calendar => true)", "22023", "slot infinity is outside years 1 to 9999"),
        ("SELECT almanac.enqueue('fixture-attacker', '200000-01-01T00:00:00Z', 'k', off_calendar => true)", "22023", "is outside years 1 to 9999"),
        (
            "SELECT almanac.enqueue('fixture-attacker', '2026-01-01T00:00:00Z', 'k', run_after => 'infinity')",
            "22023",
            "run_after infinity is outside years 1 to 9999",
        ),
        // The role holds EXECUTE on the two functions and nothing else.
        ("SELECT count(*) FROM almanac.jobs", "42501", "permission denied for table jobs"),
        ("INSERT INTO almanac.jobs (task, slot, key) VALUES ('fixture-attacker', now(), 'forged')", "42501", "permission denied for table jobs"),
        ("SELECT almanac.check_key('k')", "42501", "permission denied for function check_key"),
    ] {
        let (got, message) = refused(&app, sql).await;
        assert_eq!(got, code, "{sql}: {message}");
        assert!(message.contains(text), "{sql}: {message}");
    }
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key IN ('k', 'forged')").await, 0);
    host.stop().await;
}

/// The calendar the database checks against says what the host's calendar says, for
/// slot starts and for instants next to them, across weekday, last-day, nearest-weekday,
/// nth-weekday and seconds schedules in zones with daylight saving.
#[tokio::test(flavor = "multi_thread")]
async fn the_published_calendar_agrees_with_the_hosts() {
    let db = TestDb::new().await;
    let now = Utc::now();
    db.schedule("fixture-minutely", "* * * * *", "UTC", now).await;
    let app = application(&db).await;
    for (cron, zone) in [
        ("0 9 * * 1-5", "Europe/Berlin"),
        ("0 0 L * *", "UTC"),
        ("0 12 15W * *", "America/New_York"),
        ("30 8 * * 5#2", "Asia/Kolkata"),
        ("*/20 */7 1,15 * *", "Australia/Lord_Howe"),
        ("15 */6 * * * *", "Pacific/Chatham"),
    ] {
        let schedule = almanac::calendar::Schedule::new(cron, zone).unwrap();
        db.client.execute("UPDATE almanac.schedules SET cron = $1, zone = $2, calendar = $3", &[&cron, &zone, &schedule.published_json(now)]).await.unwrap();
        let from = now - chrono::Duration::days(200);
        // Inside the published window (400 days either side of today).
        let until = now + chrono::Duration::days(390);
        let starts: Vec<DateTime<Utc>> = schedule.slots_after(from).take_while(|s| s.start < until).take(150).map(|s| s.start).collect();
        assert!(starts.len() >= 10, "{cron}: {} slots", starts.len());
        let mut instants = Vec::new();
        for start in &starts {
            instants.extend([*start, *start + chrono::Duration::seconds(1), *start - chrono::Duration::minutes(1), *start + chrono::Duration::hours(1)]);
        }
        let mut disagree = Vec::new();
        for at in instants {
            app.batch_execute("BEGIN").await.unwrap();
            let accepted = app.query_one("SELECT almanac.enqueue('fixture-minutely', $1, 'probe')", &[&at]).await.is_ok();
            app.batch_execute("ROLLBACK").await.unwrap();
            if accepted != schedule.is_on_calendar(at) {
                disagree.push((at, accepted));
            }
        }
        assert!(disagree.is_empty(), "{cron} in {zone}: database and host disagree on {disagree:?}");
    }
}

#[path = "../../examples/enqueue/enqueue.rs"]
mod example;

/// The book's examples (docs/src/guide/enqueue.md), run as they are printed there: psql, Rust and Node each place
/// an order and enqueue its receipt in one transaction, as a role granted only
/// `almanac_client` (and its own table).
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_examples_run() {
    let root = crate::support::workspace();
    let page = std::fs::read_to_string(root.join("docs/src/guide/enqueue.md")).unwrap();
    for file in ["enqueue.sql", "enqueue.rs", "enqueue.mjs", "enqueue.py"] {
        let text = std::fs::read_to_string(root.join("examples/enqueue").join(file)).unwrap();
        assert!(page.contains(text.trim_end()), "docs/src/guide/enqueue.md does not show examples/enqueue/{file} as it is");
    }
    let db = TestDb::new().await;
    let role = format!("{}_shop", db.name);
    db.client
        .batch_execute(&format!(
            "CREATE TABLE orders (id bigint PRIMARY KEY, email text NOT NULL, placed_at timestamptz NOT NULL DEFAULT now());
             CREATE ROLE {role} LOGIN;
             GRANT almanac_client TO {role};
             GRANT SELECT, INSERT ON orders TO {role};
             INSERT INTO almanac.schedules (task, cron, zone, generated_through, settings) VALUES ('send-receipt', NULL, 'UTC', now(), '{{}}');"
        ))
        .await
        .unwrap();
    let url = format!("{} user={role}", db.url);

    let psql = std::process::Command::new("psql")
        .args([url.as_str(), "-v", "ON_ERROR_STOP=1", "-q", "-f"])
        .arg(root.join("examples/enqueue/enqueue.sql"))
        .output()
        .unwrap();
    assert!(psql.status.success(), "psql: {}", String::from_utf8_lossy(&psql.stderr));

    let mut client = crate::support::connect(&url).await;
    example::place_order(&mut client, 43, "grace@example.com").await.unwrap();

    assert!(root.join("examples/enqueue/node_modules/pg").exists(), "run `bash scripts/bootstrap.sh --need-node` (it installs the example's pg)");
    let field = |name: &str| db.url.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{name}="))).unwrap().to_owned();
    let node_url = format!("postgresql://{role}@localhost/{}?host={}&port={}", db.name, field("host"), field("port"));
    let node = std::process::Command::new("node")
        .args(["enqueue.mjs", "44", "linus@example.com"])
        .current_dir(root.join("examples/enqueue"))
        .env("DATABASE_URL", &node_url)
        .output()
        .unwrap();
    assert!(node.status.success(), "node: {}", String::from_utf8_lossy(&node.stderr));

    let python = root.join(".venv/bin/python");
    assert!(python.exists(), "run `bash scripts/bootstrap.sh --need-python` (it installs psycopg)");
    let py = std::process::Command::new(&python)
        .args(["enqueue.py", "45", "barbara@example.com"])
        .current_dir(root.join("examples/enqueue"))
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(py.status.success(), "python: {}", String::from_utf8_lossy(&py.stderr));

    let jobs: Vec<(String, serde_json::Value, bool)> = db
        .client
        .query("SELECT j.key, j.payload, j.slot = o.placed_at FROM almanac.jobs j JOIN orders o ON j.key = 'order-' || o.id ORDER BY j.key", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("order-42".into(), serde_json::json!({"order": 42, "email": "ada@example.com"}), true),
            ("order-43".into(), serde_json::json!({"order": 43, "email": "grace@example.com"}), true),
            ("order-44".into(), serde_json::json!({"order": 44, "email": "linus@example.com"}), true),
            ("order-45".into(), serde_json::json!({"order": 45, "email": "barbara@example.com"}), true),
        ]
    );
    // The same order again: its insert fails, and no second job appears.
    assert!(example::place_order(&mut client, 43, "grace@example.com").await.is_err());
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 4);
}

/// A role given one task may enqueue into that task alone, and a refusal names only the
/// tasks it may use; `almanac_client` still reaches every task.
#[tokio::test(flavor = "multi_thread")]
async fn an_application_given_one_task_enqueues_into_it_alone() {
    let db = TestDb::new().await;
    db.accounts(1).await;
    let plugins = plugin_dir(&["daily_points", "fixture_attacker"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.schedules", 2, Duration::from_secs(60)).await;
    host.stop().await;
    let role = format!("{}_shop", db.name);
    db.client.batch_execute(&format!("CREATE ROLE {role} LOGIN")).await.unwrap();
    let (code, out, err) = crate::support::almanac(&db.url, &["clients", "allow", &role, "fixture-attacker"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("{role} may enqueue into fixture-attacker"));
    let shop = crate::support::connect(&format!("{} user={role}", db.url)).await;
    let created: bool =
        shop.query_one("SELECT almanac.enqueue('fixture-attacker', '2026-01-01T00:00:00Z', 'mine', off_calendar => true)", &[]).await.unwrap().get(0);
    assert!(created);
    for sql in [
        "SELECT almanac.enqueue('daily-points', '2026-03-07T16:00:00Z', '1', off_calendar => true)",
        "SELECT almanac.enqueue_many('daily-points', '2026-03-07T16:00:00Z', ARRAY['1'])",
        "SELECT almanac.enqueue('no-such-task', '2026-03-07T16:00:00Z', '1')",
    ] {
        let (code, text) = refused(&shop, sql).await;
        assert_eq!(code, "42501", "{sql}: {text}");
        assert!(text.contains(&format!("role {role} may not enqueue into task")), "{text}");
        assert!(text.contains("hint: tasks it may enqueue into: fixture-attacker ("), "only its own task is named: {text}");
    }
    let (code, text) = refused(&shop, "SELECT count(*) FROM almanac.jobs").await;
    assert_eq!(code, "42501", "{text}");
    // almanac_client members reach every task, as before.
    let app = application(&db).await;
    assert!(app.query_one("SELECT almanac.enqueue('daily-points', '2026-03-07T16:00:00Z', '1', off_calendar => true)", &[]).await.is_ok());
    let (code, _, _) = crate::support::almanac(&db.url, &["clients", "revoke", &role, "fixture-attacker"]);
    assert_eq!(code, 0);
    let (code, text) = refused(&shop, "SELECT almanac.enqueue('fixture-attacker', '2026-01-02T00:00:00Z', 'k', off_calendar => true)").await;
    assert_eq!(code, "42501");
    assert!(text.contains("hint: tasks it may enqueue into: none"), "{text}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points'").await, 1, "only almanac_client's");
}
