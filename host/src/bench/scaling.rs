//! Throughput as hosts are added on one database: N hosts (each with its own pools,
//! plugin sessions and workers; in this one process, so their CPU is one process's), the
//! same backlog on the same cluster, with the WAL each job writes (against the floor's,
//! in the same run) and the connections each host holds at its busiest.
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::harness::{reset, run_floor, timed, verified, Options, Run};
use crate::cluster::Cluster;
use crate::{executor, host};

#[derive(Debug, Clone, Serialize)]
pub struct ScalingRun {
    pub hosts: usize,
    #[serde(flatten)]
    pub run: Run,
    pub wal_bytes_per_job: f64,
    /// The most connections a host held at once during the run (all hosts' sessions in
    /// pg_stat_activity, divided by the hosts).
    pub connections_per_host: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalingReport {
    pub batch: usize,
    /// The floor (the job's SQL alone, --workers connections) at the same batch.
    pub floor: Run,
    pub floor_wal_bytes_per_job: f64,
    pub runs: Vec<ScalingRun>,
}

const WAL: &str = "SELECT pg_current_wal_insert_lsn()::text";
const CONNECTIONS: &str = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'almanac%'";

pub async fn measure(
    cluster: &Cluster,
    url: &str,
    options: &Options,
    host_options: &host::Options,
    first: &host::Host,
    digest: &str,
) -> anyhow::Result<ScalingReport> {
    let batch = options.batches.last().copied().unwrap_or(1);
    let admin = first.pool.get().await?;
    let most = options.hosts.iter().copied().max().unwrap_or(1);
    let shutdown = CancellationToken::new();
    let mut hosts = Vec::with_capacity(most);
    for _ in 1..most {
        hosts.push(host::Host::start(url, host_options.clone(), &shutdown).await?);
    }

    reset(&admin).await?;
    let before = wal(&admin).await?;
    let (seconds, cpu) = timed(&admin, cluster, || run_floor(&first.pool, options.workers, batch, digest)).await?;
    let floor_wal = wal_since(&admin, &before).await? / options.accounts as f64;
    let floor = verified(&admin, batch, options.accounts, seconds, Some(cpu)).await?;

    let mut runs = Vec::new();
    for &n in &options.hosts {
        reset(&admin).await?;
        let before = wal(&admin).await?;
        let running: Vec<&host::Host> = std::iter::once(first).chain(hosts.iter()).take(n).collect();
        let exec = executor::Options { batch, ..host_options.executor.clone() };
        let mut busiest = 0i64;
        let (seconds, cpu) = timed(&admin, cluster, || async {
            let stop = CancellationToken::new();
            let mut set = tokio::task::JoinSet::new();
            // Kept until the run ends: a wake-up channel whose sender is gone reads as closed.
            let mut wakes = Vec::new();
            for host in &running {
                let (wake, wake_rx) = watch::channel(0u64);
                wakes.push(wake);
                set.spawn(executor::run(
                    host.pool.clone(),
                    host.logins.clone(),
                    host.loaded.clone(),
                    exec.clone(),
                    Default::default(),
                    Default::default(),
                    wake_rx,
                    stop.clone(),
                ));
            }
            loop {
                busiest = busiest.max(admin.query_one(CONNECTIONS, &[]).await?.get(0));
                let left: bool =
                    admin.query_one("SELECT EXISTS (SELECT 1 FROM almanac.jobs WHERE status = 'pending' AND run_after <= now())", &[]).await?.get(0);
                if !left {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            stop.cancel();
            while set.join_next().await.is_some() {}
            Ok(())
        })
        .await?;
        let wal_bytes_per_job = wal_since(&admin, &before).await? / options.accounts as f64;
        let run = verified(&admin, batch, options.accounts, seconds, Some(cpu)).await?;
        runs.push(ScalingRun { hosts: n, run, wal_bytes_per_job, connections_per_host: busiest as f64 / n as f64 });
    }
    shutdown.cancel();
    Ok(ScalingReport { batch, floor, floor_wal_bytes_per_job: floor_wal, runs })
}

async fn wal(admin: &crate::db::Conn) -> anyhow::Result<String> {
    Ok(admin.query_one(WAL, &[]).await?.get(0))
}

async fn wal_since(admin: &crate::db::Conn, before: &str) -> anyhow::Result<f64> {
    let row = admin.query_one("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)::float8", &[&before]).await?;
    Ok(row.get(0))
}

/// The table `almanac bench --hosts` prints.
pub fn render(r: &ScalingReport, workers: usize) -> String {
    let mut out = format!(
        "\nscaling (hosts on one database, each --workers {workers} --batch {}; all in this process; floor: the job's SQL on {workers} connections):\n\
         HOSTS  ALMANAC job/s  x 1 HOST  WAL B/job  x FLOOR  CONN/HOST  PG CPU s  HOST CPU s\n",
        r.batch
    );
    let one = r.runs.iter().find(|s| s.hosts == 1).map(|s| s.run.jobs_per_second);
    out.push_str(&format!(
        "floor  {:>13.0}  {:>8}  {:>9.0}  {:>7}  {:>9}  {:>8.2}  {:>10.2}\n",
        r.floor.jobs_per_second,
        "",
        r.floor_wal_bytes_per_job,
        "1.00",
        workers,
        r.floor.postgres_cpu_seconds.unwrap_or(f64::NAN),
        r.floor.host_cpu_seconds.unwrap_or(f64::NAN)
    ));
    for s in &r.runs {
        out.push_str(&format!(
            "{:<5}  {:>13.0}  {:>8.2}  {:>9.0}  {:>7.2}  {:>9.1}  {:>8.2}  {:>10.2}\n",
            s.hosts,
            s.run.jobs_per_second,
            one.map_or(f64::NAN, |o| s.run.jobs_per_second / o),
            s.wal_bytes_per_job,
            s.wal_bytes_per_job / r.floor_wal_bytes_per_job,
            s.connections_per_host,
            s.run.postgres_cpu_seconds.unwrap_or(f64::NAN),
            s.run.host_cpu_seconds.unwrap_or(f64::NAN)
        ));
    }
    out
}
