//! The private cluster's commands: `psql`, `url`, `stop`.
use std::process::ExitCode;

use almanac::cluster::Cluster;
use almanac::db;

use super::database::Database;

/// Run psql on `url` (as libpq reads it, so the same string works), or say how.
pub fn psql(database: &Database, args: &[String]) -> anyhow::Result<ExitCode> {
    let psql = ["/usr/bin/psql", "/usr/local/bin/psql"].into_iter().find(|p| std::path::Path::new(p).exists()).unwrap_or("psql");
    match std::process::Command::new(psql).arg(&database.url).args(args).status() {
        Ok(status) => Ok(ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1))),
        Err(e) => anyhow::bail!("cannot run psql ({e}); install it (Debian: postgresql-client) and run: psql '{}'", db::conninfo::redact(&database.url)),
    }
}

/// What an application or psql connects with, its password hidden.
pub fn url(database: &Database) -> anyhow::Result<ExitCode> {
    println!("{}", db::conninfo::redact(&database.url));
    Ok(ExitCode::SUCCESS)
}

/// A fast shutdown of the private cluster under `data_dir`, if it runs.
pub fn stop(data_dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    let cluster = Cluster::new(&data_dir.join("pg"))?;
    if !cluster.data_dir.join("PG_VERSION").exists() || !cluster.is_running() {
        println!("the private cluster under {} is not running", data_dir.display());
    } else {
        tokio::task::block_in_place(|| cluster.stop("fast"))?;
        println!("stopped the private cluster under {}", data_dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
