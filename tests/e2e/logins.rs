//! Plugin logins on a server that checks passwords: each plugin's SQL runs in sessions
//! of its own login, which logs in with a SCRAM password the hosts made, and `almanac
//! logins rotate` replaces it while a host runs without losing or repeating a job.
use std::time::Duration;

use crate::support::private::{PrivateCluster, Setup};
use crate::support::{almanac, plugin_dir, HostProc};

#[tokio::test(flavor = "multi_thread")]
async fn plugin_logins_hold_real_passwords_that_rotate_while_a_host_runs() {
    // The host's own role logs in by trust here; every other role by password.
    let hba = "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n";
    let pg = PrivateCluster::start_with(Setup { tcp: true, hba: Some(hba.into()), ..Setup::default() }).await;
    let db = pg.db().await;
    db.accounts(3).await;
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn_url(&pg.url(), plugins.path(), &["--workers", "2"], &[]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 3, Duration::from_secs(60)).await;
    let login = almanac::login::login_name("daily-points", "almanac");
    let sessions = format!("SELECT count(*) FROM pg_stat_activity WHERE usename = '{login}'");
    assert!(db.count(&sessions).await > 0, "the jobs ran in sessions of the plugin's login");
    let (canlogin, member_of): (bool, String) = {
        let row = db
            .client
            .query_one(
                "SELECT r.rolcanlogin, (SELECT string_agg(m.roleid::regrole::text, ',') FROM pg_auth_members m WHERE m.member = r.oid) FROM pg_roles r WHERE r.rolname = $1",
                &[&login],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(canlogin);
    let role = almanac::access::role_name("daily-points", "almanac");
    assert_eq!(member_of, format!("\"{role}\""), "a member of the plugin's role alone");

    // The server checks the password: a wrong one is refused.
    let wrong = format!("host=127.0.0.1 port={} dbname=almanac user={login} password=wrong", pg.cluster.port);
    let refused = tokio_postgres::connect(&wrong, tokio_postgres::NoTls).await.err().expect("a wrong password is refused");
    assert_eq!(refused.code().map(|c| c.code().to_owned()).as_deref(), Some("28P01"), "{refused}");

    // Rotated while the host runs; the sessions open now are ended, so the next ones
    // must log in with the new password, which the host reads again.
    let before: String = db.client.query_one("SELECT password FROM almanac.plugin_logins WHERE login = $1", &[&login]).await.unwrap().get(0);
    let (code, out, err) = almanac(&pg.url(), &["logins", "rotate"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "rotated the login of daily-points");
    let after: String = db.client.query_one("SELECT password FROM almanac.plugin_logins WHERE login = $1", &[&login]).await.unwrap().get(0);
    assert_ne!(before, after);
    db.client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", &[&login]).await.unwrap();
    let old = format!("host=127.0.0.1 port={} dbname=almanac user={login} password={before}", pg.cluster.port);
    assert!(tokio_postgres::connect(&old, tokio_postgres::NoTls).await.is_err(), "the old password no longer logs in");

    db.enqueue("daily-points", "2026-03-02T16:00:00Z", &["1", "2", "3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 6, Duration::from_secs(60)).await;

    // A login may change its own password (a plugin that reached ALTER ROLE through a
    // function would lock the hosts out): the host gives it a new one and goes on.
    db.client.batch_execute(&format!("ALTER ROLE \"{login}\" PASSWORD 'hijacked'")).await.unwrap();
    db.client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", &[&login]).await.unwrap();
    db.enqueue("daily-points", "2026-03-03T16:00:00Z", &["1", "2", "3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 9, Duration::from_secs(60)).await;
    let hijacked = format!("host=127.0.0.1 port={} dbname=almanac user={login} password=hijacked", pg.cluster.port);
    assert!(tokio_postgres::connect(&hijacked, tokio_postgres::NoTls).await.is_err(), "the plugin's password no longer logs in");
    host.stop().await;
    assert!(host.log().contains("giving it a new one"), "{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points = 30").await, 3, "each account paid once per day");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await, 0);
    // The listing shows the login, not its password.
    let (code, out, _) = almanac(&pg.url(), &["logins"]);
    assert_eq!(code, 0);
    assert!(out.contains(&login) && !out.contains(&after), "{out}");
}
