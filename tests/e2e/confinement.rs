//! Confinement, round two: a plugin calls only the functions it declares, holds up no
//! lock a host needs, cannot change the live role by a dry run, reaches nothing of
//! another database, and leaves no large object behind. Each attack runs with the host
//! as a superuser, as a role with CREATEROLE alone, and through PgBouncer.
use std::time::{Duration, Instant};

use serde_json::json;

use almanac::cluster::Bouncer;

use crate::hardening::{caller_functions, enqueue_attacks, outcome};
use crate::support::{almanac, cluster, connect, plugin_dir, HostProc, TestDb};

const NEVER: &str = "is never available to plugins (it runs SQL given as text, changes the host's session, or reaches outside the job)";

/// How the host reaches its database.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Superuser,
    /// A role with CREATEROLE that owns the database (the book's deployment).
    CreateRole,
    /// A superuser through PgBouncer in transaction mode.
    Pooled,
}

/// A database for one test: `db.client` is a superuser's (for what an application's
/// administrator does), `host` the host's own role's; `url` and `args` start a host.
struct Site {
    db: TestDb,
    host: tokio_postgres::Client,
    url: String,
    args: Vec<&'static str>,
    _pooler: Option<(Bouncer, tempfile::TempDir)>,
}

impl Site {
    async fn new(mode: Mode) -> Site {
        match mode {
            Mode::Superuser => {
                let db = TestDb::new().await;
                let host = connect(&db.url).await;
                Site { url: db.url.clone(), db, host, args: vec![], _pooler: None }
            }
            Mode::Pooled => {
                let db = TestDb::new().await;
                let host = connect(&db.url).await;
                let dir = tempfile::Builder::new().prefix("almanac-pgbouncer-").tempdir().unwrap();
                let bouncer = Bouncer::start(cluster(), dir.path()).await.expect("start pgbouncer");
                Site { url: bouncer.url(&db.name), db, host, args: vec!["--pooler"], _pooler: Some((bouncer, dir)) }
            }
            Mode::CreateRole => {
                static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let name = format!("confined_{}_{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
                let admin = connect(&cluster().url("postgres")).await;
                admin.batch_execute(&format!("CREATE ROLE {name} LOGIN CREATEROLE")).await.unwrap();
                admin.batch_execute(&format!("CREATE DATABASE {name} OWNER {name}")).await.unwrap();
                let url = cluster().url(&name).replace("user=postgres", &format!("user={name}"));
                let (code, _, err) = almanac(&url, &["migrate"]);
                assert_eq!(code, 0, "the host's role migrates its own database: {err}");
                let db = TestDb { name: name.clone(), url: cluster().url(&name), client: connect(&cluster().url(&name)).await };
                let host = connect(&url).await;
                Site { db, host, url, args: vec![], _pooler: None }
            }
        }
    }

    fn spawn(&self, plugins: &std::path::Path, extra: &[&str]) -> HostProc {
        let mut args = self.args.clone();
        args.extend_from_slice(extra);
        HostProc::spawn_url(&self.url, plugins, &args, &[])
    }

    /// The seed's accounts, owned by the host's role (which grants them).
    async fn accounts(&self, n: i64) {
        self.host
            .batch_execute(&format!(
                "CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0); INSERT INTO accounts SELECT g, 0 FROM generate_series(1, {n}) g"
            ))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn functions_are_called_only_by_declaration() {
    by_declaration(Mode::Superuser).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn functions_are_called_only_by_declaration_with_a_createrole_host() {
    by_declaration(Mode::CreateRole).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn functions_are_called_only_by_declaration_through_pgbouncer() {
    by_declaration(Mode::Pooled).await;
}

/// The round's attacks on functions: an extension's text-SQL runner, an application's
/// SECURITY DEFINER function in the schema of a declared table, the same through
/// attribute notation, a large object; and what a declared function may still do.
async fn by_declaration(mode: Mode) {
    let site = Site::new(mode).await;
    let db = &site.db;
    site.accounts(10).await;
    caller_functions(db).await;
    db.client
        .batch_execute(
            "CREATE EXTENSION tablefunc;
             CREATE FUNCTION public.credit(account bigint, points bigint) RETURNS void LANGUAGE sql SECURITY DEFINER
                 AS $$ UPDATE public.accounts SET points = points + credit.points WHERE id = credit.account $$;
             CREATE FUNCTION public.bump(account bigint) RETURNS bigint LANGUAGE sql SECURITY DEFINER
                 AS $$ UPDATE public.accounts SET points = points + 1000000 WHERE id = bump.account RETURNING points $$;
             CREATE FUNCTION public.round(account float8, places integer) RETURNS float8 LANGUAGE sql SECURITY DEFINER
                 AS $$ UPDATE public.accounts SET points = points + 1000000 WHERE id = round.account::bigint RETURNING points::float8 $$;",
        )
        .await
        .unwrap();
    let crosstab = "SELECT * FROM public.crosstab('SELECT ''a''::text, ''b''::text, set_config(''role'', ''none'', false)') AS t(r text, c text)";
    let refusals = vec![
        ("crosstab", json!([{"query": crosstab}]), format!("refused: function public.crosstab {NEVER}; a plugin that must call it declares it in `calls`, and the operator is warned")),
        ("crosstab-bare", json!([{"query": "SELECT * FROM crosstab('SELECT 1') AS t(a int)"}]), format!("refused: function crosstab {NEVER}")),
        (
            "credit",
            json!([{"execute": "SELECT public.credit(7, 1000000)"}]),
            "refused: function public.credit is not on the host's allowlist (built-in functions for math, text, date/time, JSON, arrays and aggregates are; \
             a function of the database is when the plugin declares it in `calls` and calls it as declared, with its schema)"
                .to_owned(),
        ),
        (
            "attribute",
            json!([{"query": "SELECT (7::bigint).bump"}]),
            "refused: `.bump` may call function bump of the database (PostgreSQL reads `x.bump` as `bump(x)` when x has no such column); declare the function in `calls` if that is meant".to_owned(),
        ),
        ("large-object", json!([{"query": "SELECT lo_create(0)"}]), format!("refused: function lo_create {NEVER}")),
        (
            "overload",
            json!([{"query": "SELECT round(7::float8, 2)"}]),
            "refused: round(...) may call function public.round of the database, which an unqualified call can reach; \
             write pg_catalog.round(...) for the built-in, or declare public.round in `calls` and call it so"
                .to_owned(),
        ),
    ];
    let attacks: Vec<(&str, serde_json::Value)> = refusals.iter().map(|(k, s, _)| (*k, s.clone())).collect();
    enqueue_attacks(db, "fixture-attacker", &attacks).await;
    // A declared function that makes a large object: the job commits, the object does not outlive it.
    let made = "UPDATE fixture_caller_effects SET note = public.run_as_none('SELECT lo_create(0)::text') WHERE key = 'large-object'";
    enqueue_attacks(db, "fixture-caller", &[("large-object", json!([{"execute": made}]))]).await;
    let plugins = plugin_dir(&["fixture_attacker", "fixture_caller"]);
    let mut host = site.spawn(plugins.path(), &["--workers", "2"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status <> 'pending'", attacks.len() as i64 + 1, Duration::from_secs(90)).await;
    host.stop().await;
    for (key, _, error) in &refusals {
        assert_eq!(outcome(db, "fixture-attacker", key).await, ("failed".to_owned(), error.clone()), "attack {key} ({mode:?})");
    }
    assert_eq!(outcome(db, "fixture-caller", "large-object").await.0, "done", "{mode:?}");
    let note: String = db.client.query_one("SELECT note FROM fixture_caller_effects WHERE key = 'large-object'", &[]).await.unwrap().get(0);
    assert!(note.contains(" as almanac_login_fixture-caller_"), "made by the plugin's login: {note}");
    assert_eq!(db.count("SELECT count(*) FROM pg_largeobject_metadata").await, 0, "the job's large object was removed with its session's leftovers");
    assert_eq!(db.count("SELECT points FROM accounts WHERE id = 7").await, 0, "no undeclared function wrote accounts ({mode:?})");
    // What the declaration says, as the catalog has it, for operators.
    let calls: serde_json::Value = db.client.query_one("SELECT calls FROM almanac.plugins WHERE name = 'fixture-caller'", &[]).await.unwrap().get(0);
    let held = calls.as_array().unwrap().iter().find(|c| c["name"] == "public.hold_host_keys").expect("the declared call is recorded");
    assert_eq!((held["signature"].as_str(), held["security_definer"].as_bool()), (Some("hold_host_keys(double precision)"), Some(true)), "{calls}");
    assert!(host.log().contains("declared call hold_host_keys(double precision): is SECURITY DEFINER"), "{}", host.log());
    let (code, out, _) = almanac(&db.url, &["plugins"]);
    assert_eq!(code, 0);
    assert!(out.contains("hold_host_keys(double precision) volatile SECURITY DEFINER"), "{out}");
    // A dry run shows them too.
    let dir = plugin_dir(&["fixture_caller"]);
    let (_, out, err) = almanac(&db.url, &["try", "fixture-caller", "--slot", "2026-01-01", "--key", "shown", "--plugins", &dir.path().display().to_string()]);
    assert!(out.contains("declared call hold_host_keys(double precision) volatile SECURITY DEFINER"), "{out}{err}");
}

/// A plugin reaches pg_advisory_lock through a function it declares, and holds every key
/// a host ever used: hosts start, migrate and run jobs all the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_holding_every_advisory_key_holds_up_no_host() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    caller_functions(&db).await;
    let keys = json!([{"execute": "SELECT public.hold_host_keys(90)"}]);
    enqueue_attacks(&db, "fixture-caller", &[("keys", keys)]).await;
    let caller = plugin_dir(&["fixture_caller"]);
    let mut holder = HostProc::spawn(&db, caller.path(), &[]);
    let held = "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND a.usename::text LIKE 'almanac_login_fixture-caller_%'";
    db.wait_count(held, 5, Duration::from_secs(60)).await;
    let started = Instant::now();
    let (code, _, err) = tokio::task::spawn_blocking({
        let url = db.url.clone();
        move || almanac(&url, &["migrate"])
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "almanac migrate took {:?} while a plugin held the keys", started.elapsed());
    // A new month of history, made now, while the keys are held.
    db.client.batch_execute("SET statement_timeout = '20s'").await.unwrap();
    // (A month of jobs waits for every open job transaction, whose claim locked the
    // default partition, keys or none: the outbox's shows the keys are not waited for.)
    let month: Option<String> = db.client.query_one("SELECT almanac.add_outbox_partition(now() + interval '11 months')", &[]).await.unwrap().get(0);
    assert!(month.is_some());
    let points = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, points.path(), &[]);
    db.enqueue("daily-points", "2026-03-07T16:00:00Z", &["1", "2", "3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND status = 'done'", 3, Duration::from_secs(60)).await;
    assert!(db.count(held).await >= 5, "the keys were held all along");
    host.stop().await;
    holder.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_of_another_build_touches_nothing_live() {
    dry_run(Mode::Superuser).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_of_another_build_touches_nothing_live_with_a_createrole_host() {
    dry_run(Mode::CreateRole).await;
}

/// `almanac try` of another build of daily-points that declares `app_secrets` (and not
/// `accounts`) runs under a role of its own: the live role's grants stay byte for byte
/// what they were, the running version keeps its rights and never gains the secret.
async fn dry_run(mode: Mode) {
    let site = Site::new(mode).await;
    let db = &site.db;
    site.accounts(3).await;
    site.host.batch_execute("CREATE TABLE app_secrets (secret text); INSERT INTO app_secrets VALUES ('hunter2')").await.unwrap();
    let live = plugin_dir(&["daily_points"]);
    let mut host = site.spawn(live.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.plugins WHERE name = 'daily-points'", 1, Duration::from_secs(60)).await;
    // Every grant as PostgreSQL reads it (a NULL ACL is the owner's defaults).
    let grants = "SELECT string_agg(g, E'\\n' ORDER BY g) FROM (
                      SELECT format('%s %s %s %s', o.name, (o.a).grantee::regrole, (o.a).privilege_type, (o.a).is_grantable) AS g
                      FROM (SELECT c.relname::text AS name, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) AS a FROM pg_class c
                            WHERE c.relname IN ('accounts', 'points_ledger', 'app_secrets')
                            UNION ALL
                            SELECT 'schema public', aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) FROM pg_namespace n WHERE n.nspname = 'public') o
                  ) grants";
    let before: String = db.client.query_one(grants, &[]).await.unwrap().get(0);
    let other = plugin_dir(&["fixture_snoop"]);
    let (code, out, err) = almanac(&site.url, &["try", "daily-points", "--slot", "2026-03-08", "--key", "1", "--plugins", &other.path().display().to_string()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("SELECT secret FROM app_secrets") && out.contains("rolled back"), "the dry run read what it declares:\n{out}");
    let after: String = db.client.query_one(grants, &[]).await.unwrap().get(0);
    assert_eq!(after, before, "the live role's grants, byte for byte ({mode:?})");
    let dry = out.lines().find_map(|l| l.trim().strip_prefix("ran as role ")).and_then(|l| l.split(',').next()).expect("the dry run names its role");
    assert!(dry.starts_with("almanac_dry_"), "{out}");
    assert_eq!(db.count(&format!("SELECT count(*) FROM pg_roles WHERE rolname = '{dry}'")).await, 0, "the dry run's role is gone");
    assert_eq!(db.count("SELECT count(*) FROM almanac.dry_logins").await, 0);
    let role = almanac::access::role_name("daily-points", &db.name);
    let secret: bool = db.client.query_one("SELECT has_table_privilege($1, 'app_secrets', 'SELECT')", &[&role]).await.unwrap().get(0);
    assert!(!secret, "the live role never gained the secret");
    // The running version keeps its rights: its jobs still pay.
    db.enqueue("daily-points", "2026-03-07T16:00:00Z", &["1", "2", "3"]).await;
    db.wait_count("SELECT count(*) FROM accounts WHERE points = 10", 3, Duration::from_secs(60)).await;
    host.stop().await;
}

/// Two databases of one server, each with a task of the same name: B's plugin login and
/// B's host role (a CREATEROLE role of its own) reach nothing of A. A's role of an older
/// version, shared by every database, is retired in place.
#[tokio::test(flavor = "multi_thread")]
async fn roles_are_per_database() {
    let a = Site::new(Mode::Superuser).await;
    let b = Site::new(Mode::CreateRole).await;
    a.accounts(3).await;
    b.accounts(3).await;
    a.db.client.batch_execute("CREATE TABLE app_secrets (secret text); INSERT INTO app_secrets VALUES ('hunter2')").await.unwrap();
    // As an older version left database A: the task's role shared by every database.
    let shared = "almanac_task_daily-points";
    let admin = connect(&cluster().url("postgres")).await;
    admin.batch_execute(&format!("DROP ROLE IF EXISTS \"{shared}\"; CREATE ROLE \"{shared}\" NOLOGIN")).await.unwrap();
    a.db.client.batch_execute(&format!("GRANT SELECT, UPDATE ON accounts, app_secrets TO \"{shared}\"")).await.unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let mut hosts = [a.spawn(plugins.path(), &[]), b.spawn(plugins.path(), &[])];
    for site in [&a, &b] {
        site.db.wait_count("SELECT count(*) FROM almanac.plugins WHERE name = 'daily-points'", 1, Duration::from_secs(60)).await;
    }
    let (role_a, role_b) = (almanac::access::role_name("daily-points", &a.db.name), almanac::access::role_name("daily-points", &b.db.name));
    assert_ne!(role_a, role_b);
    assert_eq!(a.db.count(&format!("SELECT count(*) FROM pg_roles WHERE rolname = '{shared}'")).await, 0, "the shared role, holding nothing any more, is gone");
    // B's login, with B's password, in database A.
    let row = b.db.client.query_one("SELECT login, password FROM almanac.plugin_logins WHERE task = 'daily-points'", &[]).await.unwrap();
    let (login, password): (String, String) = (row.get(0), row.get(1));
    let as_login = format!("host={} port={} dbname={} user={login} password={password}", cluster().socket_dir.display(), cluster().port, a.db.name);
    let (client, conn) = tokio_postgres::connect(&as_login, tokio_postgres::NoTls).await.expect("a login may connect; it may not read");
    tokio::spawn(conn);
    for sql in ["SELECT count(*) FROM accounts", "SELECT count(*) FROM app_secrets"] {
        let e = client.query_one(sql, &[]).await.expect_err("B's login reads nothing of A");
        assert_eq!(e.code().map(|c| c.code()), Some("42501"), "{sql}: {e}");
    }
    // B's host role in database A.
    let b_host = b.url.replace(&format!("dbname={}", b.db.name), &format!("dbname={}", a.db.name));
    let intruder = connect(&b_host).await;
    let e = intruder.execute("UPDATE accounts SET points = 1000000", &[]).await.expect_err("B's host writes nothing of A");
    assert_eq!(e.code().map(|c| c.code()), Some("42501"), "{e}");
    a.db.enqueue("daily-points", "2026-03-07T16:00:00Z", &["1", "2", "3"]).await;
    a.db.wait_count("SELECT count(*) FROM accounts WHERE points = 10", 3, Duration::from_secs(60)).await;
    for host in &mut hosts {
        host.stop().await;
    }
}

/// A load that never finished (its host killed between the plugin's setup and its
/// grants) left the plugin's role able to create tables: the next load, under the setup
/// lock, takes that back.
#[tokio::test(flavor = "multi_thread")]
async fn a_right_to_create_an_unfinished_load_left_is_taken_back_by_the_next() {
    let db = TestDb::new().await;
    db.accounts(1).await;
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points'", 1, Duration::from_secs(60)).await;
    host.stop().await;
    let role = almanac::access::role_name("daily-points", &db.name);
    let creates = format!("SELECT count(*) FROM pg_namespace n, aclexplode(n.nspacl) a WHERE a.privilege_type = 'CREATE' AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = '{role}')");
    assert_eq!(db.count(&creates).await, 0, "its setup's right ended with its load");
    // As open_setup leaves it, had the host died right after.
    db.client.batch_execute(&format!("GRANT USAGE, CREATE ON SCHEMA public TO \"{role}\"")).await.unwrap();
    assert_eq!(db.count(&creates).await, 1);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    host.wait_log("a plugin's role kept the right to create tables from an unfinished load: taken back", Duration::from_secs(60)).await;
    host.wait_log("plugin loaded task=daily-points", Duration::from_secs(60)).await;
    assert_eq!(db.count(&creates).await, 0, "log:\n{}", host.log());
    host.stop().await;
}
