//! An existing application database owned by someone else (PostgreSQL 15: schema public
//! belongs to the database's owner): `almanac grants` prints what the owner runs, each
//! refusal on the way names its object, privilege and statement, and a host as an
//! ordinary CREATEROLE role then serves daily-points, having been given only what
//! `grants` printed.
use std::time::Duration;

use crate::support::{almanac, cluster, connect, plugin_dir, HostProc};

/// The statements of `grants`' script (its lines that are not comments or blank).
fn statements(script: &str) -> Vec<&str> {
    script.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("--")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_owner_runs_what_grants_prints_and_the_host_serves() {
    let admin = connect(&cluster().url("postgres")).await;
    let (owner, host, database) =
        (format!("app_owner_{}", std::process::id()), format!("app_host_{}", std::process::id()), format!("app_{}", std::process::id()));
    admin.batch_execute(&format!("CREATE ROLE {owner} LOGIN; CREATE ROLE {host} LOGIN CREATEROLE")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {database} OWNER {owner}")).await.unwrap();
    let as_owner = connect(&cluster().url(&database).replace("user=postgres", &format!("user={owner}"))).await;
    // The application's table, with a serial column: its sequence is the owner's too.
    as_owner
        .batch_execute("CREATE TABLE accounts (id bigserial PRIMARY KEY, points bigint NOT NULL DEFAULT 0); INSERT INTO accounts (points) SELECT 0 FROM generate_series(1, 3)")
        .await
        .unwrap();
    let url = cluster().url(&database).replace("user=postgres", &format!("user={host}"));
    let plugins = plugin_dir(&["daily_points"]);
    // The owner's table a job of fixture-sleeper sleeps for (it declares it; added to the
    // folder once the grants are done, below).
    as_owner.batch_execute("CREATE TABLE fixture_sleeper_control (seconds float8 NOT NULL); INSERT INTO fixture_sleeper_control VALUES (600)").await.unwrap();
    let dir = plugins.path().display().to_string();

    // Nothing granted: the host cannot even make its schemas, and says who runs what.
    let mut refused = HostProc::spawn_url(&url, plugins.path(), &[], &[]);
    let status = refused.wait(Duration::from_secs(30)).await;
    assert!(!status.success());
    let log = refused.log();
    assert!(
        log.contains(&format!("as {owner} (its owner), run: GRANT CREATE ON DATABASE \"{database}\" TO \"{host}\";"))
            && log.contains("almanac grants --plugins DIR"),
        "{log}"
    );

    let (code, script, err) = almanac(&url, &["grants", "--plugins", &dir]);
    assert_eq!(code, 0, "{script}{err}");
    let expected = [
        format!("GRANT CREATE ON DATABASE \"{database}\" TO \"{host}\";"),
        format!("GRANT CREATE ON SCHEMA \"public\" TO \"{host}\" WITH GRANT OPTION;"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE public.accounts TO \"{host}\" WITH GRANT OPTION;"),
        format!("GRANT USAGE ON SEQUENCE public.accounts_id_seq TO \"{host}\" WITH GRANT OPTION;"),
    ];
    assert_eq!(statements(&script), expected, "{script}");
    // The reviewer's summary: who runs each, and why the host needs it.
    assert!(script.contains(&format!("-- as {owner}:")), "{script}");
    assert!(script.contains("--   USAGE on sequence public.accounts_id_seq: public.accounts.id draws from it, and daily-points insert(s) rows"), "{script}");
    assert!(script.contains("--   SELECT, INSERT, UPDATE, DELETE on public.accounts: daily-points write(s) it"), "{script}");
    assert!(script.contains("CREATE on schema public: the host passes it to daily-points for its setup only"), "{script}");
    assert!(script.contains("NOTE: points_ledger does not exist yet: daily-points's setup creates it"), "{script}");

    // All but the sequence: the plugin is refused, naming the sequence and the statement.
    for statement in &expected[..3] {
        as_owner.batch_execute(statement).await.unwrap();
    }
    let mut host_proc = HostProc::spawn_url(&url, plugins.path(), &[], &[]);
    host_proc.wait_log("plugin not loaded", Duration::from_secs(60)).await;
    let log = host_proc.log();
    let line = log.lines().find(|l| l.contains("plugin not loaded")).unwrap();
    assert!(line.contains("cannot grant USAGE on sequence public.accounts_id_seq"), "{line}");
    assert!(line.contains(&format!("As {owner} (its owner), run: {}", expected[3])), "{line}");
    host_proc.stop().await;
    // Refused at its grants after its setup had run: the right to create tables the setup
    // was given is taken back, not kept by the plugin's role.
    let creators = "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'almanac\\_task\\_%' AND has_schema_privilege(oid, 'public', 'CREATE')";
    assert_eq!(as_owner.query_one(creators, &[]).await.unwrap().get::<_, i64>(0), 0);
    assert!(as_owner.query_one("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'almanac\\_task\\_%'", &[]).await.unwrap().get::<_, i64>(0) > 0);

    // What `grants` prints now is the one statement left; the owner runs it.
    let (code, script, err) = almanac(&url, &["grants", "--plugins", &dir]);
    assert_eq!(code, 0, "{script}{err}");
    assert_eq!(statements(&script), [expected[3].as_str()], "{script}");
    as_owner.batch_execute(&expected[3]).await.unwrap();

    let mut host_proc = HostProc::spawn_url(&url, plugins.path(), &[], &[]);
    host_proc.wait_log("plugin loaded", Duration::from_secs(60)).await;
    let as_host = connect(&url).await;
    as_host
        .batch_execute("INSERT INTO almanac.jobs (task, slot, key) SELECT 'daily-points', '2026-03-01T16:00:00Z', g::text FROM generate_series(1, 3) g")
        .await
        .unwrap();
    crate::support::wait_for("three jobs done", Duration::from_secs(60), || async {
        as_host.query_one("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", &[]).await.unwrap().get::<_, i64>(0) == 3
    })
    .await;
    host_proc.stop().await;
    let points: i64 = as_owner.query_one("SELECT sum(points)::bigint FROM accounts", &[]).await.unwrap().get(0);
    assert_eq!(points, 30, "each account paid once");
    let (code, script, _) = almanac(&url, &["grants", "--plugins", &dir]);
    assert_eq!(code, 0);
    assert!(statements(&script).is_empty() && script.contains(&format!("Nothing to grant: {host} holds what these plugins need.")), "{script}");
    assert!(!host_proc.log().contains("ERROR"), "{}", host_proc.log());

    // Such a host sees its plugins' sessions: `status` counts a job running in one.
    std::fs::copy(crate::support::built_plugins().join("fixture_sleeper.wasm"), plugins.path().join("fixture_sleeper.wasm")).unwrap();
    let (code, script, err) = almanac(&url, &["grants", "--plugins", &dir]);
    assert_eq!(code, 0, "{err}");
    for statement in statements(&script) {
        as_owner.batch_execute(statement).await.unwrap();
    }
    // Restarted, the host loads daily-points again: its grants are revoked and made anew,
    // the sequence's USAGE included (a REVOKE ALL on it was refused, every time).
    let mut host_proc = HostProc::spawn_url(&url, plugins.path(), &["--workers", "2"], &[]);
    host_proc.wait_log("task=fixture-sleeper", Duration::from_secs(60)).await;
    host_proc.wait_log("plugin loaded task=daily-points", Duration::from_secs(60)).await;
    assert!(!host_proc.log().contains("plugin not loaded"), "{}", host_proc.log());
    as_host.batch_execute("INSERT INTO almanac.jobs (task, slot, key) VALUES ('fixture-sleeper', '2026-01-01T00:00:00Z', 's1')").await.unwrap();
    crate::support::wait_for("the sleeper asleep", Duration::from_secs(60), || async {
        // This database's: other tests' sleepers run on the same server.
        let asleep = format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}' AND state = 'active' AND query LIKE 'SELECT pg_sleep%'");
        admin.query_one(&asleep, &[]).await.unwrap().get::<_, i64>(0) == 1
    })
    .await;
    let (_, out, err) = almanac(&url, &["status", "--json"]);
    let sleeper: serde_json::Value = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| l["task"] == "fixture-sleeper")
        .unwrap_or_else(|| panic!("{out}{err}"));
    assert_eq!((sleeper["pending"].as_i64(), sleeper["running"].as_i64()), (Some(1), Some(1)), "{out}");
    admin
        .batch_execute(&format!("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE datname = '{database}' AND query LIKE 'SELECT pg_sleep%'"))
        .await
        .unwrap();
    host_proc.stop().await;
}
