//! The physical floor: the seed's per-job SQL run by PostgreSQL's own `pgbench` (the
//! server package ships it), prepared statements, one job per transaction, a partial
//! index of the pending jobs, at the bench's concurrency: what a C client doing nothing
//! but the job's SQL gets from this server. Every ratio of Almanac is printed against it.
use std::process::Command;
use std::time::Instant;

use anyhow::{ensure, Context};

use super::cpu;
use super::harness::{Options, Run};
use crate::cluster::Cluster;

const SETUP: &str = include_str!("pgbench_setup.sql");
const SCRIPT: &str = include_str!("pgbench_floor.sql");

/// Jobs run: the accounts, rounded down to a multiple of the workers (each pgbench client
/// runs the same number of transactions, and every claim must find a job).
pub(super) async fn run(cluster: &Cluster, admin: &tokio_postgres::Client, dbname: &str, options: &Options) -> anyhow::Result<Run> {
    let clients = options.workers.max(1) as i64;
    let jobs = options.accounts / clients * clients;
    ensure!(jobs > 0, "the pgbench floor needs at least {clients} accounts");
    admin.batch_execute(SETUP).await?;
    admin.execute("INSERT INTO bench_floor_jobs (account_id) SELECT id FROM accounts ORDER BY id LIMIT $1", &[&jobs]).await?;
    for statement in ["VACUUM ANALYZE bench_floor_jobs", "VACUUM ANALYZE accounts", "CHECKPOINT"] {
        admin.batch_execute(statement).await?;
    }
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("floor.sql");
    std::fs::write(&script, SCRIPT)?;
    let (pg0, client0) = (cpu::cluster(&cluster.data_dir).unwrap_or(0.0), cpu::children());
    let started = Instant::now();
    let out = Command::new(cluster.bin("pgbench"))
        .args(["-n", "-M", "prepared", "-c", &clients.to_string(), "-j", &clients.to_string(), "-t", &(jobs / clients).to_string(), "-f"])
        .arg(&script)
        .args(["-h", &cluster.socket_dir.display().to_string(), "-p", &cluster.port.to_string(), "-U", "postgres", dbname])
        .output()
        .context("run pgbench (PostgreSQL's server package ships it)")?;
    let seconds = started.elapsed().as_secs_f64();
    let (pg1, client1) = (cpu::cluster(&cluster.data_dir).unwrap_or(0.0), cpu::children());
    ensure!(out.status.success(), "pgbench failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let row = admin
        .query_one(
            "SELECT (SELECT sum(points)::bigint FROM accounts), (SELECT count(*) FROM bench_floor_jobs WHERE status = 'done'),
                    (SELECT count(*) FROM points_ledger)",
            &[],
        )
        .await?;
    let (points, done, ledger): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    ensure!(
        points == 10 * jobs && done == jobs && ledger == jobs,
        "pgbench floor: wrong result: {points} points, {done} done, {ledger} ledger rows for {jobs} jobs"
    );
    admin.batch_execute("DROP TABLE bench_floor_jobs").await?;
    Ok(Run {
        batch: 1,
        jobs,
        seconds,
        jobs_per_second: jobs as f64 / seconds,
        host_cpu_seconds: Some(client1 - client0),
        postgres_cpu_seconds: Some(pg1 - pg0),
    })
}
