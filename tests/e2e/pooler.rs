//! Through a real PgBouncer in transaction pooling mode: no statement outlives its
//! transaction, wake-ups come from a direct connection or from polling, and a pooler
//! restart mid-run loses nothing and doubles nothing.
use std::time::Duration;

use crate::support::{almanac, cluster, plugin_dir, HostProc, TestDb};
use almanac::cluster::Bouncer;
use almanac::{executor, host};

async fn backlog(db: &TestDb, n: i64) {
    db.accounts(n).await;
    db.client.batch_execute("INSERT INTO almanac.jobs (task, slot, key) SELECT 'daily-points', '2026-03-07T16:00:00Z', id::text FROM accounts").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backlog_runs_through_pgbouncer_and_survives_its_restart() {
    let db = TestDb::new().await;
    backlog(&db, 3000).await;
    let dir = tempfile::Builder::new().prefix("almanac-pgbouncer-").tempdir().unwrap();
    let mut bouncer = Bouncer::start(cluster(), dir.path()).await.expect("start pgbouncer");
    let pooled = bouncer.url(&db.name);
    let plugins = plugin_dir(&["daily_points"]);
    // One host with a direct connection for LISTEN, one polling; both at --batch 1 so the
    // run lasts long enough to restart the pooler in the middle of it.
    let mut a = HostProc::spawn_url(&pooled, plugins.path(), &["--pooler", "--direct-url", &db.url, "--batch", "1", "--workers", "2"], &[]);
    let mut b = HostProc::spawn_url(&pooled, plugins.path(), &["--pooler", "--batch", "1", "--workers", "2"], &[]);
    db.wait_count("SELECT least(count(*), 300) FROM almanac.jobs WHERE status = 'done'", 300, Duration::from_secs(60)).await;
    bouncer.restart().await.expect("restart pgbouncer");
    let at_restart = db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'").await;
    assert!(at_restart < 3000, "the restart came mid-run ({at_restart} done)");
    eprintln!("pooler restarted with {at_restart} of 3000 jobs done");
    // On a timeout, say where the missing jobs stand and what holds the database.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'").await < 3000 {
        if std::time::Instant::now() > deadline {
            eprintln!("{:?}", db.client.query("SELECT status || ' ' || attempts || ' ' || crashes || ' ' || coalesce(last_error,'-') || ' ' || (run_after - now())::text FROM almanac.jobs WHERE status <> 'done'", &[]).await.unwrap().iter().map(|r| r.get::<_,String>(0)).collect::<Vec<_>>());
            eprintln!("{:?}", db.client.query("SELECT coalesce(application_name,'') || ' ' || coalesce(state,'') || ' ' || left(coalesce(query,''),80) FROM pg_stat_activity WHERE datname = current_database()", &[]).await.unwrap().iter().map(|r| r.get::<_,String>(0)).collect::<Vec<_>>());
            eprintln!(
                "{:?}",
                db.client
                    .query("SELECT row_to_json(c)::text FROM almanac.claims c", &[])
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>()
            );
            panic!("timed out after 120s: not every job is done; logs:\n{}\n{}", a.log(), b.log());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10").await, 0, "every account exactly once");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await, 0);
    for host in [&a, &b] {
        let log = host.log();
        assert!(!log.contains("prepared statement"), "no statement outlived its transaction:\n{log}");
        assert!(!log.contains("unsupported startup parameter"), "{log}");
    }
    assert!(b.log().contains("no LISTEN wake-ups"), "the polling host says so once:\n{}", b.log());
    assert!(a.is_running() && b.is_running());
    a.stop().await;
    b.stop().await;

    // Migrating needs a session: refused through the pooler, with the way out.
    let (code, _, err) = almanac(&pooled, &["migrate", "--pooler"]);
    assert!(code != 0 && err.contains("--direct-url"), "{err}");
    // Every other command works through it.
    let (code, out, err) = almanac(&pooled, &["status", "--pooler"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("daily-points"), "{out}");
    let (code, out, err) = almanac(&pooled, &["jobs", "--pooler", "--limit", "3"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("done"), "{out}");
}

/// Whether statements may outlive their transaction is a property of a host's connection
/// target, not of its process: a host through the pooler and a host straight to
/// PostgreSQL share one process and one backlog, and each job runs once.
#[tokio::test(flavor = "multi_thread")]
async fn a_pooled_and_a_direct_host_share_one_process() {
    let db = TestDb::new().await;
    backlog(&db, 2000).await;
    let dir = tempfile::Builder::new().prefix("almanac-pgbouncer-").tempdir().unwrap();
    let bouncer = Bouncer::start(cluster(), dir.path()).await.expect("start pgbouncer");
    let plugins = plugin_dir(&["daily_points"]);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mut served = Vec::new();
    for (url, pooled) in [(bouncer.url(&db.name), true), (db.url.clone(), false)] {
        let options = host::Options {
            pooled,
            executor: executor::Options { batch: 4, workers: 2, poll_interval: Duration::from_millis(50), ..executor::Options::default() },
            ..host::Options::new(plugins.path().to_owned(), dir.path())
        };
        let host = host::Host::start(&url, options, &shutdown).await.unwrap_or_else(|e| panic!("a host with pooled={pooled}: {e:#}"));
        served.push(tokio::spawn(host.serve(shutdown.clone())));
        if pooled {
            // The pooled host has run jobs before the direct one starts beside it.
            db.wait_count("SELECT least(count(*), 200) FROM almanac.jobs WHERE status = 'done'", 200, Duration::from_secs(60)).await;
        }
    }
    assert!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'").await < 2000, "the direct host started mid-run");
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 2000, Duration::from_secs(120)).await;
    shutdown.cancel();
    for serving in served {
        serving.await.unwrap().unwrap();
    }
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10").await, 0, "every account exactly once");
    // A prepared statement through the pooler would have failed a batch: every job ran once.
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE attempts <> 1 OR last_error IS NOT NULL").await, 0);
}

/// The first fenced block of `lang` after `heading` in `page` of the book.
fn book_block(page: &str, heading: &str, lang: &str) -> String {
    let text = std::fs::read_to_string(crate::support::workspace().join("docs/src").join(page)).unwrap();
    let section = &text[text.find(heading).unwrap_or_else(|| panic!("{heading} in {page}"))..];
    let fence = format!("```{lang}\n");
    let start = section.find(&fence).unwrap_or_else(|| panic!("a {lang} block under {heading}")) + fence.len();
    section[start..start + section[start..].find("```").unwrap()].to_owned()
}

/// The book's PgBouncer recipe, run as the book gives it (only addresses, names and the
/// port replaced): per-user pools, `auth_user` + `auth_query` through the SECURITY DEFINER
/// lookup function, SCRAM from the clients. A CREATEROLE host and its plugin's login both
/// authenticate through it, and the jobs run.
#[tokio::test(flavor = "multi_thread")]
async fn the_books_pgbouncer_recipe_serves_a_host_and_its_plugin_logins() {
    const HEADING: &str = "### PgBouncer, step by step";
    let (sql, ini) = (book_block("operations/managed-postgres.md", HEADING, "sql"), book_block("operations/managed-postgres.md", HEADING, "ini"));
    let id = std::process::id();
    let (host, auth, database) = (format!("pool_host_{id}"), format!("pgb_auth_{id}"), format!("pooled_{id}"));
    let admin = crate::support::connect(&cluster().url("postgres")).await;
    admin.batch_execute(&format!("CREATE ROLE {host} LOGIN CREATEROLE PASSWORD 'host-secret'")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {database} OWNER {host}")).await.unwrap();
    let direct = cluster().url(&database).replace("user=postgres", &format!("user={host}"));
    let as_host = crate::support::connect(&direct).await;
    as_host
        .batch_execute(
            "CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0); INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 3) g",
        )
        .await
        .unwrap();
    // The book's SQL, as a superuser in the database.
    let superuser = crate::support::connect(&cluster().url(&database)).await;
    superuser.batch_execute(&sql.replace("pgbouncer_auth", &auth).replace("'almanac_host'", &format!("'{host}'"))).await.unwrap();

    let dir = tempfile::Builder::new().prefix("almanac-pgbouncer-book-").tempdir().unwrap();
    let port = Bouncer::free_port().unwrap();
    let file = |name: &str| dir.path().join(name).display().to_string();
    let ini = ini
        .replace(
            "app = host=db.example.com port=5432 dbname=app",
            &format!("{database} = host={} port={} dbname={database}", cluster().socket_dir.display(), cluster().port),
        )
        .replace("listen_port = 6432", &format!("listen_port = {port}"))
        .replace("/etc/pgbouncer/userlist.txt", &file("userlist.txt"))
        .replace("pgbouncer_auth", &auth);
    assert!(!ini.contains("example.com") && ini.contains("auth_query = SELECT usename, passwd FROM pgbouncer.get_auth($1)"), "{ini}");
    // Where this machine keeps PgBouncer's files.
    let ini = format!("{ini}unix_socket_dir =\nlogfile = {}\npidfile = {}\n", file("pgbouncer.log"), file("pgbouncer.pid"));
    std::fs::write(dir.path().join("pgbouncer.ini"), ini).unwrap();
    std::fs::write(dir.path().join("userlist.txt"), format!("\"{auth}\" \"change-me\"\n")).unwrap();
    let pooled = format!("host=127.0.0.1 port={port} user={host} password=host-secret dbname={database}");
    let bouncer = Bouncer::with_config(cluster(), dir.path(), port, pooled.clone()).await.expect("start pgbouncer");
    // No other role's secret is handed out: the lookup refuses a superuser and an
    // ordinary role alike.
    admin.batch_execute(&format!("CREATE ROLE other_{id} LOGIN PASSWORD 'other-secret'")).await.unwrap();
    for user in ["postgres".to_owned(), format!("other_{id}")] {
        let refused =
            tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user={user} password=other-secret dbname={database}"), tokio_postgres::NoTls).await;
        assert!(refused.is_err(), "{user} logged in through the lookup");
    }

    let plugins = plugin_dir(&["daily_points"]);
    let mut host_proc = HostProc::spawn_url(&pooled, plugins.path(), &["--pooler", "--direct-url", &direct], &[]);
    host_proc.wait_log("plugin loaded", Duration::from_secs(60)).await;
    as_host.batch_execute("INSERT INTO almanac.jobs (task, slot, key) SELECT 'daily-points', '2026-03-07T16:00:00Z', id::text FROM accounts").await.unwrap();
    crate::support::wait_for("three jobs done", Duration::from_secs(60), || async {
        as_host.query_one("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", &[]).await.unwrap().get::<_, i64>(0) == 3
    })
    .await;
    host_proc.stop().await;
    assert_eq!(as_host.query_one("SELECT count(*) FROM accounts WHERE points = 10", &[]).await.unwrap().get::<_, i64>(0), 3);
    // The plugin's statements came through PgBouncer as its own login: a pool of its own.
    let login = almanac::login::login_name("daily-points", &database);
    let log = bouncer.log();
    assert!(log.contains(&format!("user={login}")) && log.contains(&format!("user={host}")), "{log}");
}
