//! PostgreSQL over TLS, with libpq's sslmodes: a server that accepts TLS only
//! (`hostssl`), certificates made here, every mistake named.
use std::time::Duration;

use crate::support::certs::{self, Ca};
use crate::support::private::{PrivateCluster, Setup};
use crate::support::{almanac, plugin_dir, HostProc};

/// A cluster that accepts TCP connections over TLS only, with a certificate from `ca`
/// for `localhost`; user `certuser` must present a client certificate from `ca`.
async fn tls_cluster(ca: &Ca, dir: &std::path::Path) -> PrivateCluster {
    let server = ca.server(&["localhost"]);
    let root = certs::write(dir, "root.pem", &ca.pem(), 0o644);
    PrivateCluster::start_with(Setup {
        tcp: true,
        settings: vec![
            ("ssl".into(), "on".into()),
            ("ssl_cert_file".into(), "'server.crt'".into()),
            ("ssl_key_file".into(), "'server.key'".into()),
            ("ssl_ca_file".into(), "'ca.crt'".into()),
        ],
        files: vec![("server.crt".into(), server.cert), ("server.key".into(), server.key), ("ca.crt".into(), ca.pem())],
        hba: Some(
            "local all all trust\n\
             hostssl all certuser 127.0.0.1/32 cert\n\
             hostssl all all 127.0.0.1/32 trust\n"
                .into(),
        ),
        url_params: format!("host=localhost hostaddr=127.0.0.1 sslmode=verify-full sslrootcert={}", root.display()),
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_full_runs_a_backlog_with_two_hosts() {
    let files = tempfile::tempdir().unwrap();
    let ca = Ca::new("Almanac test CA");
    // start_with ran `almanac migrate` through verify-full already.
    let private = tls_cluster(&ca, files.path()).await;
    let db = private.db().await;
    db.accounts(300).await;
    db.client.batch_execute("INSERT INTO almanac.jobs (task, slot, key) SELECT 'daily-points', '2026-03-07T16:00:00Z', id::text FROM accounts").await.unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let mut a = HostProc::spawn(&db, plugins.path(), &["--workers", "2"]);
    let mut b = HostProc::spawn(&db, plugins.path(), &["--workers", "2"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 300, Duration::from_secs(90)).await;
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10").await, 0, "every account exactly once");
    // The hosts' connections are encrypted and say who they are.
    let encrypted = db
        .count(
            "SELECT count(DISTINCT a.application_name) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE s.ssl AND a.application_name IN ('almanac worker', 'almanac listen')",
        )
        .await;
    assert_eq!(encrypted, 2, "worker and listen connections over TLS");
    let plain = db.count("SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name LIKE 'almanac%' AND NOT s.ssl").await;
    assert_eq!(plain, 0);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_mistakes_are_named_and_client_certificates_authenticate() {
    let files = tempfile::tempdir().unwrap();
    let dir = files.path();
    let ca = Ca::new("Almanac test CA");
    let private = tls_cluster(&ca, dir).await;
    let port = private.cluster.port;
    let root = dir.join("root.pem");
    let base = format!("host=localhost hostaddr=127.0.0.1 port={port} user=postgres dbname=almanac");
    let status = |url: &str| almanac(url, &["status"]);

    let (code, _, err) = status(&format!("{base} sslmode=verify-full sslrootcert={}", root.display()));
    assert_eq!(code, 0, "verify-full with the right CA: {err}");

    let other = certs::write(dir, "other.pem", &Ca::new("Someone else's CA").pem(), 0o644);
    let (code, _, err) = status(&format!("{base} sslmode=verify-full sslrootcert={}", other.display()));
    assert_ne!(code, 0);
    assert!(err.contains("unknown issuer") && err.contains("localhost"), "wrong CA named, with the host: {err}");

    // The certificate is for localhost; 127.0.0.1 is another name.
    let by_address = format!("host=127.0.0.1 port={port} user=postgres dbname=almanac");
    let (code, _, err) = status(&format!("{by_address} sslmode=verify-full sslrootcert={}", root.display()));
    assert_ne!(code, 0);
    assert!(err.contains("does not match the host name"), "name mismatch named: {err}");
    // verify-ca checks the chain only, as libpq does.
    let (code, _, err) = status(&format!("{by_address} sslmode=verify-ca sslrootcert={}", root.display()));
    assert_eq!(code, 0, "verify-ca ignores the name: {err}");

    let (code, _, err) = status(&format!("{base} sslmode=disable"));
    assert_ne!(code, 0);
    assert!(err.contains("no encryption"), "the server's refusal of plaintext: {err}");

    // verify-full with no root certificate anywhere: refused before connecting.
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::support::almanac_bin())
        .arg("status")
        .env("DATABASE_URL", format!("{base} sslmode=verify-full"))
        .env("HOME", home.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("root.crt\" does not exist") && err.contains("sslrootcert=system"), "{err}");
    let (code, _, err) = status(&format!("{base} sslmode=verify-full sslrootcert={}/missing.pem", dir.display()));
    assert!(code != 0 && err.contains("missing.pem"), "{err}");

    // Client certificates: `certuser` is let in by its certificate alone.
    private.db().await.client.batch_execute("CREATE ROLE certuser LOGIN SUPERUSER").await.unwrap();
    let client = ca.client("certuser");
    let cert = certs::write(dir, "client.crt", &client.cert, 0o644);
    let key = certs::write(dir, "client.key", &client.key, 0o600);
    let as_certuser = format!("host=localhost hostaddr=127.0.0.1 port={port} user=certuser dbname=almanac sslmode=verify-full sslrootcert={}", root.display());
    let (code, _, err) = status(&format!("{as_certuser} sslcert={} sslkey={}", cert.display(), key.display()));
    assert_eq!(code, 0, "cert authentication: {err}");
    let (code, _, err) = status(&as_certuser);
    assert!(code != 0 && err.contains("certificate"), "no client certificate, no entry: {err}");
    let open = certs::write(dir, "open.key", &client.key, 0o644);
    let (code, _, err) = status(&format!("{as_certuser} sslcert={} sslkey={}", cert.display(), open.display()));
    assert!(code != 0 && err.contains("group or world access"), "a key others can read is refused, as libpq does: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn require_against_a_server_without_tls_is_refused_and_prefer_falls_back() {
    let private = PrivateCluster::start(true).await;
    let url = private.url();
    let (code, _, err) = almanac(&format!("{url} sslmode=require"), &["status"]);
    assert!(code != 0 && err.contains("server does not support TLS") && err.contains("127.0.0.1"), "{err}");
    let (code, _, err) = almanac(&format!("{url} sslmode=prefer"), &["status"]);
    assert_eq!(code, 0, "prefer takes plaintext from a server without TLS: {err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_https_receiver_with_a_private_ca_gets_every_message_once_keyed() {
    use crate::support::receiver::{answer, Receiver};
    let files = tempfile::tempdir().unwrap();
    let ca = Ca::new("Receiver's private CA");
    let pair = ca.server(&["localhost"]);
    let receiver = Receiver::start_https(std::sync::Arc::new(|_, _| answer(200, "ok")), &pair.cert, &pair.key).await;
    let ca_file = certs::write(files.path(), "receiver-ca.pem", &ca.pem(), 0o644);
    let config = certs::write(
        files.path(),
        "almanac.toml",
        &format!(
            "[tasks.points-notify]\npaused = true\n\n[outbox.topics.points-awarded]\nsink = \"webhook\"\nurl = \"{}\"\nca_file = \"{}\"\n",
            receiver.url(),
            ca_file.display()
        ),
        0o644,
    );
    let db = crate::support::TestDb::new().await;
    db.accounts(5).await;
    db.enqueue("points-notify", "2026-03-07T16:00:00Z", &["1", "2", "3", "4", "5"]).await;
    let plugins = plugin_dir(&["points_notify"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", config.to_str().unwrap(), "--outbox-poll-interval", "50ms"]);
    db.wait_count("SELECT count(*) FROM almanac.outbox WHERE status = 'delivered'", 5, Duration::from_secs(60)).await;
    let mut keys: Vec<String> = receiver.requests().into_iter().filter_map(|r| r.idempotency_key).collect();
    keys.sort();
    keys.dedup();
    let expected: Vec<String> =
        db.client.query("SELECT topic || '/' || key FROM almanac.outbox ORDER BY 1", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(keys, expected, "one Idempotency-Key per message, over https");
    host.stop().await;
}
