//! Where a command connects: DATABASE_URL, libpq's environment or the private cluster
//! (started and migrated if needed), through a pooler or not; and how an operator's task
//! and slot are read against the database.
use anyhow::Context;

use almanac::cluster::{Cluster, Settings};
use almanac::{db, scheduler};

/// Where a command connects: a connection string, and whether it leads through a
/// transaction-pooling pooler (`--pooler`).
pub(crate) struct Database {
    pub url: String,
    pub pooled: bool,
    /// The private cluster under --data-dir (DATABASE_URL and libpq's variables unset):
    /// it keeps running after the command, until `almanac stop`.
    pub private: bool,
}

impl Database {
    /// `database_url`'s choice, through a pooler if `pooled`.
    pub(crate) async fn of(url: Option<String>, data_dir: &std::path::Path, dbname: &str, pooled: bool) -> anyhow::Result<Database> {
        let private = url.as_deref().is_none_or(str::is_empty) && !libpq_env();
        Ok(Database { url: database_url(url, data_dir, dbname).await?, pooled, private })
    }

    /// Straight to PostgreSQL.
    pub(crate) fn direct(url: &str) -> Database {
        Database { url: url.to_owned(), pooled: false, private: false }
    }

    /// Where the CLI's connections go, as role `cli` in `application_name`.
    pub(crate) fn target(&self) -> anyhow::Result<db::Target> {
        Ok(db::config(&self.url, self.pooled, &db::SessionSettings::default())?.role("cli"))
    }

    /// One connection for one command.
    pub(crate) async fn connect(&self) -> anyhow::Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> {
        let target = self.target()?;
        let (client, connection) = target.connect().await.map_err(|e| anyhow::anyhow!("cannot connect to {}: {}", target.describe(), db::error_chain(&e)))?;
        let handle = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("connection closed: {e}");
            }
        });
        Ok((client, handle))
    }
}

/// The schedule of `task` (None: it runs on demand), or an error naming the tasks there
/// are: a typo must not read as "0 jobs" or enqueue a job no host will ever run.
pub(crate) async fn task_schedule(client: &tokio_postgres::Client, task: &str) -> anyhow::Result<Option<almanac::calendar::Schedule>> {
    match scheduler::operate::schedule_of(client, task).await? {
        Some(stored) => stored.schedule().map_err(|e| anyhow::anyhow!("the stored schedule of {task:?}: {e}")),
        None => {
            let known: Vec<String> = scheduler::operate::list(client).await?.into_iter().map(|r| r.task).collect();
            anyhow::bail!("no task {task:?}: no host has registered it (known: {})", known.join(", "))
        }
    }
}

/// A slot as an operator writes it: by the task's schedule, or, on demand, any instant
/// (a date means UTC midnight).
pub(crate) fn parse_slot(schedule: Option<&almanac::calendar::Schedule>, text: &str) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    match schedule {
        Some(schedule) => schedule.parse_slot(text),
        None => almanac::calendar::parse_instant(text, chrono_tz::UTC),
    }
    .map_err(anyhow::Error::msg)
}

/// Whether libpq's variables name a server.
fn libpq_env() -> bool {
    ["PGHOST", "PGHOSTADDR", "PGDATABASE"].iter().any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// `DATABASE_URL`; else libpq's `PG*` variables when they name a server (`PGHOST`,
/// `PGHOSTADDR` or `PGDATABASE`); else the private cluster (started if needed) with
/// database `dbname`.
pub(crate) async fn database_url(url: Option<String>, data_dir: &std::path::Path, dbname: &str) -> anyhow::Result<String> {
    if let Some(url) = url.filter(|u| !u.is_empty()) {
        return Ok(url);
    }
    if libpq_env() {
        // An empty connection string: everything comes from the environment.
        return Ok(String::new());
    }
    let pg_dir = data_dir.join("pg");
    let cluster =
        tokio::task::spawn_blocking(move || Cluster::ensure(&pg_dir, &Settings::default())).await?.context("cannot start the private PostgreSQL cluster")?;
    tracing::info!(data = %cluster.data_dir.display(), socket = %cluster.socket_dir.display(), "DATABASE_URL is unset: using the private PostgreSQL cluster");
    let url = cluster.provision(dbname).await?;
    // The private cluster is Almanac's own: its databases hold Almanac's tables from the
    // first command on (`almanac status` on a fresh one failed on a missing table).
    let applied = almanac::migrate::run(&Database::direct(&url).target()?).await?;
    if !applied.is_empty() {
        tracing::info!(database = dbname, migrations = applied.len(), "migrated the private cluster's database");
    }
    Ok(url)
}
