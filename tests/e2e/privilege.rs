//! Least privilege: every statement a plugin sends passes PostgreSQL's own parser and
//! then runs under the plugin's own role, which holds only the tables it declares.
use std::time::Duration;

use crate::support::{cluster, connect, plugin_dir, HostProc, TestDb};

/// Each attack of fixture-hostile and the failed attempt it must end as, in `database`.
fn attacks(database: &str) -> Vec<(&'static str, String)> {
    let role = almanac::access::role_name("fixture-hostile", database);
    // The refusal, and what the host adds to it for the statement the attack sent.
    let denied = |what: &str, sql: &str| {
        let message = format!("permission denied for {what}");
        format!("database error 42501: {message} ({})", almanac::db::refusal::plugin_hint(&message, sql, &role))
    };
    let commit = "refused: COMMIT is transaction control, which belongs to the host (the job's transaction commits when `run` returns ok)";
    vec![
        ("mark-jobs-done", denied("schema almanac", "UPDATE")),
        ("swallow-mark-jobs-done", denied("schema almanac", "UPDATE")),
        ("read-other-plugin", denied("table points_ledger", "SELECT")),
        ("write-undeclared", denied("table accounts", "UPDATE")),
        ("reset-role", "refused: RESET ROLE changes the session, which belongs to the host".into()),
        ("set-role", "refused: SET ROLE changes the session, which belongs to the host".into()),
        (
            "set-config-role",
            "refused: function set_config is never available to plugins (it runs SQL given as text, changes the host's session, or reaches outside the job)"
                .into(),
        ),
        ("commit", commit.into()),
        ("swallow-commit", commit.into()),
        ("drop-table", "refused: DROP is DDL; declare your tables in `describe()` (`tables` and `setup`) instead".into()),
        ("copy-to-program", "refused: COPY is not available to plugins".into()),
        ("second-statement", "refused: 2 statements in one string; send them one at a time".into()),
        (
            "read-server-file",
            "refused: function pg_read_file is never available to plugins (it runs SQL given as text, changes the host's session, or reaches outside the job)"
                .into(),
        ),
        ("huge-query", format!("refused: the statement is {} bytes; the limit is 262144", (10 << 20) + 9)),
    ]
}

/// Enqueue every attack, three daily-points jobs and one job of a task no host serves.
async fn enqueue(client: &tokio_postgres::Client) {
    let keys: Vec<&str> = attacks("").iter().map(|(k, _)| *k).collect();
    client
        .execute(
            "INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'fixture-hostile', timestamptz '2026-01-01T00:00:00Z', k FROM unnest($1::text[]) k
             UNION ALL SELECT 'daily-points', timestamptz '2026-03-01T16:00:00Z', g::text FROM generate_series(1, 3) g
             UNION ALL SELECT 'ghost', timestamptz '2026-01-01T00:00:00Z', 'sentinel'",
            &[&keys],
        )
        .await
        .unwrap();
}

/// Wait for the run to settle, then check that every attack failed as explained and had
/// no effect, and that daily-points did its work under its own role.
async fn check_outcome(client: &tokio_postgres::Client) {
    let database: String = client.query_one("SELECT current_database()::text", &[]).await.unwrap().get(0);
    let (points, hostile) = (almanac::access::role_name("daily-points", &database), almanac::access::role_name("fixture-hostile", &database));
    let settled = || async {
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE task = 'fixture-hostile' AND status = 'failed'),
                        count(*) FILTER (WHERE task = 'daily-points' AND status = 'done')
                 FROM almanac.jobs",
                &[],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, i64>(1))
    };
    let want = (attacks(&database).len() as i64, 3);
    crate::support::wait_for("every attack failed and daily-points done", Duration::from_secs(60), || async { settled().await == want }).await;
    for (key, error) in attacks(&database) {
        let row = client.query_one("SELECT status, attempts, last_error FROM almanac.jobs WHERE task = 'fixture-hostile' AND key = $1", &[&key]).await.unwrap();
        let (status, attempts, last_error): (String, i32, String) = (row.get(0), row.get(1), row.get(2));
        assert_eq!((status.as_str(), attempts, last_error.as_str()), ("failed", 1, error.as_str()), "attack {key}");
        let recorded: i64 = client
            .query_one("SELECT count(*) FROM almanac.attempts WHERE task = 'fixture-hostile' AND key = $1 AND error = $2", &[&key, &error])
            .await
            .unwrap()
            .get(0);
        assert_eq!(recorded, 1, "attack {key}: the failed attempt is recorded with its reason");
    }
    let one = |sql: &'static str| async move { client.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get::<_, i64>(0) };
    assert_eq!(one("SELECT count(*) FROM fixture_hostile_effects").await, 0, "every attack's own write rolled back");
    assert_eq!(one("SELECT count(*) FROM almanac.jobs WHERE task = 'ghost' AND status = 'pending'").await, 1, "other jobs untouched");
    assert_eq!(one("SELECT count(*) FROM accounts WHERE points = 10").await, 3, "accounts intact, each paid once");
    assert_eq!(one("SELECT count(*) FROM points_ledger").await, 3);
    assert!(!std::path::Path::new("/tmp/almanac-hostile").exists(), "COPY TO PROGRAM ran nothing");

    let privilege = |sql: String| async move { client.query_one(&sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get::<_, bool>(0) };
    assert!(!privilege(format!("SELECT has_schema_privilege('{points}', 'almanac', 'USAGE')")).await);
    for table in ["almanac.jobs", "almanac.attempts", "almanac.schedules", "almanac.outbox", "almanac.plugins"] {
        let readable: bool = client.query_one("SELECT has_table_privilege($1, $2, 'SELECT')", &[&points, &table]).await.unwrap().get(0);
        assert!(!readable, "daily-points' role cannot read {table}");
    }
    assert!(privilege(format!("SELECT has_table_privilege('{points}', 'accounts', 'SELECT, UPDATE')")).await);
    assert!(privilege(format!("SELECT has_table_privilege('{points}', 'points_ledger', 'INSERT')")).await);
    assert!(!privilege(format!("SELECT has_table_privilege('{points}', 'accounts', 'TRUNCATE')")).await);
    assert!(!privilege(format!("SELECT has_table_privilege('{hostile}', 'accounts', 'SELECT')")).await);
    assert!(!privilege(format!("SELECT has_table_privilege('{hostile}', 'points_ledger', 'SELECT')")).await);
    assert!(!privilege(format!("SELECT rolcanlogin FROM pg_roles WHERE rolname = '{hostile}'")).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_plugin_touches_nothing_it_did_not_declare() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    enqueue(&db.client).await;
    let plugins = plugin_dir(&["daily_points", "fixture_hostile"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    check_outcome(&db.client).await;
    host.stop().await;
    assert!(host.log().contains("CONNECTED AS A SUPERUSER"), "the superuser warning is loud:\n{}", host.log());
}

/// The documented deployment: the host connects as an ordinary role with CREATEROLE
/// that owns its database (so it creates and owns schema almanac by migrating), and
/// owns the business table it grants.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_needs_no_superuser() {
    let admin = connect(&cluster().url("postgres")).await;
    let name = format!("least_{}", std::process::id());
    admin.batch_execute(&format!("CREATE ROLE {name} LOGIN CREATEROLE")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name} OWNER {name}")).await.unwrap();
    let url = cluster().url(&name).replace("user=postgres", &format!("user={name}"));
    let client = connect(&url).await;
    client
        .batch_execute(
            "CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0); INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 3) g",
        )
        .await
        .unwrap();
    let plugins = plugin_dir(&["daily_points", "fixture_hostile"]);
    let mut host = HostProc::spawn_url(&url, plugins.path(), &[], &[]);
    // The host migrates (as itself), sets the plugins up, then records them as loaded.
    crate::support::wait_for("both plugins loaded", Duration::from_secs(60), || async {
        client.query_one("SELECT count(*) FROM almanac.plugins", &[]).await.is_ok_and(|row| row.get::<_, i64>(0) == 2)
    })
    .await;
    enqueue(&client).await;
    check_outcome(&client).await;
    host.stop().await;
    let log = host.log();
    assert!(!log.contains("SUPERUSER") && !log.contains("plugin not loaded"), "{log}");
    let owner: String = client.query_one("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'almanac'", &[]).await.unwrap().get(0);
    assert_eq!(owner, name, "the host's role owns schema almanac");
    // `almanac enqueue` is the operator's own door: the host's role needs no grant for it.
    let (code, out, err) = crate::support::almanac(&url, &["enqueue", "daily-points", "--slot", "2026-03-08", "--key", "by-hand"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(client.query_one("SELECT count(*) FROM almanac.jobs WHERE key = 'by-hand'", &[]).await.unwrap().get::<_, i64>(0), 1);
}
