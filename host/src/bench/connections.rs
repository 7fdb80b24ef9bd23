//! Almanac's throughput by the way it reaches PostgreSQL, in one run on one cluster that
//! listens on its socket and on loopback TCP with TLS: the unix socket, TCP, TCP with
//! TLS (`sslmode=require`), and a transaction-pooling PgBouncer on TCP (`--pooler`).
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::harness::{fresh_database, reset, run_almanac, seed_accounts, settings, timed, verified, Options, Run};
use crate::cluster::{Bouncer, Cluster};
use crate::{executor, host};

const DB: &str = "almanac_bench_net";

#[derive(Debug, Clone, Serialize)]
pub struct ConnectionRun {
    /// socket, tcp, tls or pgbouncer.
    pub via: &'static str,
    /// 1 in the first round (socket → pgbouncer), 2 in the second (pgbouncer → socket):
    /// the order's own effect (checkpoints, autovacuum) shows as the gap between them.
    pub round: u8,
    #[serde(flatten)]
    pub run: Run,
}

pub async fn measure(options: &Options, host_options: &host::Options) -> anyhow::Result<Vec<ConnectionRun>> {
    let dir = options.data_dir.join("net");
    let _ = std::fs::remove_dir_all(&dir);
    let mut cluster = Cluster::new(&dir.join("pg"))?;
    cluster.port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut settings = settings();
    for (k, v) in [("listen_addresses", "'127.0.0.1'"), ("ssl", "on"), ("ssl_cert_file", "'server.crt'"), ("ssl_key_file", "'server.key'")] {
        settings.extra.push((k.into(), v.into()));
    }
    cluster.init(&settings)?;
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    for (name, text) in [("server.crt", made.cert.pem()), ("server.key", made.signing_key.serialize_pem())] {
        let path = cluster.data_dir.join(name);
        std::fs::write(&path, text)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    cluster.own(&cluster.data_dir)?;
    cluster.start()?;
    let result = measure_on(&cluster, &dir, options, host_options).await;
    let _ = cluster.stop("immediate");
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure_on(cluster: &Cluster, dir: &Path, options: &Options, host_options: &host::Options) -> anyhow::Result<Vec<ConnectionRun>> {
    let socket_url = fresh_database(cluster, DB).await?;
    seed_accounts(&socket_url, options.accounts).await?;
    let bouncer = Bouncer::start(cluster, &dir.join("pgbouncer")).await?;
    let tcp = format!("host=localhost hostaddr=127.0.0.1 port={} user=postgres dbname={DB}", cluster.port);
    // The bench's admin connection (reset, polling, checks) stays on the socket.
    let (admin, connection) = tokio_postgres::connect(&socket_url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let mut out = Vec::new();
    let vias = [
        ("socket", socket_url.clone(), false),
        ("tcp", format!("{tcp} sslmode=disable"), false),
        ("tls", format!("{tcp} sslmode=require"), false),
        ("pgbouncer", bouncer.url(DB), true),
    ];
    let rounds = vias.iter().map(|v| (1, v)).chain(vias.iter().rev().map(|v| (2, v)));
    for (round, (via, url, pooled)) in rounds {
        let (via, pooled) = (*via, *pooled);
        let shutdown = CancellationToken::new();
        let host = host::Host::start(url, host::Options { pooled, ..host_options.clone() }, &shutdown).await.with_context(|| format!("a host via {via}"))?;
        for &batch in &options.batches {
            reset(&admin).await?;
            let exec = executor::Options { batch, poll_interval: Duration::from_millis(50), ..host_options.executor.clone() };
            let (seconds, cpu) = timed(&admin, cluster, || run_almanac(&host, exec, &admin)).await?;
            out.push(ConnectionRun { via, round, run: verified(&admin, batch, options.accounts, seconds, Some(cpu)).await? });
        }
    }
    Ok(out)
}
