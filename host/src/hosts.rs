//! The hosts serving a database, as each says every heartbeat (`almanac.hosts`,
//! migration V27): `status` lists them, live or quiet, with what each serves, how busy it
//! is, and each task it runs below its share of the workers because its jobs conflict.
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::db::{Pool, Sql};
use crate::executor::share::{Busy, Concurrency};
use crate::plugin::Loaded;

const BEAT: &str = include_str!("hosts.sql");
const LIST: &str = include_str!("hosts_list.sql");

/// How often a host says it is alive: a tenth of a query a second (an idle host must
/// stay quiet), and a killed host is marked quiet within three of them.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// A host that has not beaten for this long is quiet: killed, partitioned, or stuck.
pub const QUIET: Duration = Duration::from_secs(3 * HEARTBEAT.as_secs());

/// One host as it last said.
#[derive(Debug, Clone, Serialize)]
pub struct HostRow {
    pub id: String,
    pub version: String,
    pub started_at: DateTime<Utc>,
    pub seen_seconds_ago: f64,
    pub quiet: bool,
    pub workers: i32,
    pub busy: i32,
    pub plugins: serde_json::Value,
    pub concurrency: Vec<Concurrency>,
}

/// What a host serves, as it says it.
pub struct Beat {
    pub id: String,
    pub workers: usize,
    pub loaded: Arc<Loaded>,
    pub busy: Arc<Busy>,
    /// `--task-workers`, for each task's share ([`crate::executor::share::per_task`]).
    pub task_workers: Option<usize>,
}

/// Say this host is alive every [`HEARTBEAT`] until `shutdown`, then take its row back.
pub async fn heartbeat(pool: Pool, beat: Beat, shutdown: CancellationToken) {
    let started = Utc::now();
    loop {
        if let Err(e) = say(&pool, &beat, started).await {
            tracing::debug!("heartbeat not recorded: {e}");
        }
        // A task's concurrency changing is said sooner, at most once a second.
        tokio::select! {
            _ = tokio::time::sleep(HEARTBEAT) => {}
            _ = beat.busy.changed.notified() => tokio::time::sleep(Duration::from_secs(1)).await,
            _ = shutdown.cancelled() => break,
        }
        if shutdown.is_cancelled() {
            break;
        }
    }
    if let Ok(conn) = pool.get().await {
        if let Err(e) = conn.execute("DELETE FROM almanac.hosts WHERE id = $1 AND started_at = $2", &[&beat.id, &started]).await {
            tracing::debug!("host row not removed: {e}");
        }
    }
}

async fn say(pool: &Pool, beat: &Beat, started: DateTime<Utc>) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let registry = beat.loaded.load_full();
    let tasks = registry.tasks();
    let plugins: Vec<serde_json::Value> =
        tasks.iter().filter_map(|t| registry.get(t)).map(|p| serde_json::json!({"task": p.name(), "version": p.spec.version, "digest": p.digest})).collect();
    let concurrency = beat.busy.concurrency(crate::executor::share::per_task(beat.workers, tasks.len(), beat.task_workers));
    let busy: usize = concurrency.iter().map(|c| c.running).sum();
    let conn = pool.get().await?;
    let workers = i32::try_from(beat.workers).unwrap_or(i32::MAX);
    let busy = i32::try_from(busy).unwrap_or(i32::MAX);
    let (plugins, concurrency) = (serde_json::Value::from(plugins), serde_json::to_value(&concurrency).unwrap_or_default());
    conn.execute(BEAT, &[&beat.id, &env!("CARGO_PKG_VERSION"), &started, &workers, &busy, &plugins, &concurrency]).await?;
    Ok(())
}

/// Every host on record, live ones first (none before migration V27: a newer CLI on a
/// database its hosts have not migrated yet).
pub async fn list(client: &impl Sql) -> Result<Vec<HostRow>, tokio_postgres::Error> {
    let rows = match client.rows(LIST, &[&QUIET.as_secs_f64()]).await {
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => return Ok(Vec::new()),
        other => other?,
    };
    Ok(rows
        .iter()
        .map(|r| {
            let seen: f64 = r.get(3);
            HostRow {
                id: r.get(0),
                version: r.get(1),
                started_at: r.get(2),
                seen_seconds_ago: seen,
                quiet: seen >= QUIET.as_secs_f64(),
                workers: r.get(4),
                busy: r.get(5),
                plugins: r.get(6),
                concurrency: serde_json::from_value(r.get(7)).unwrap_or_default(),
            }
        })
        .collect())
}

/// The hosts as `status` prints them: a line each, and a line for each task a host runs
/// below its share because its jobs conflict.
pub fn render(hosts: &[HostRow]) -> String {
    if hosts.is_empty() {
        return "hosts: none has said it is alive (is `almanac run` up?)\n".into();
    }
    let live = hosts.iter().filter(|h| !h.quiet).count();
    let mut out = format!("hosts: {live} live, {} quiet\n", hosts.len() - live);
    for h in hosts {
        let tasks: Vec<&str> = h.plugins.as_array().into_iter().flatten().filter_map(|p| p["task"].as_str()).collect();
        let state = if h.quiet { format!("QUIET for {:.0}s", h.seen_seconds_ago) } else { format!("seen {:.0}s ago", h.seen_seconds_ago) };
        out.push_str(&format!(
            "    {} (almanac {}): {state}, {} of {} workers busy, serving {}\n",
            crate::text::printable(&h.id),
            crate::text::printable(&h.version),
            h.busy,
            h.workers,
            if tasks.is_empty() { "no plugin".to_owned() } else { crate::text::printable(&tasks.join(", ")).into_owned() }
        ));
        for c in h.concurrency.iter().filter(|c| c.limit < c.share) {
            out.push_str(&format!(
                "        {}: {} of {} workers while its jobs conflict (deadlocks, serialization failures), {} running\n",
                crate::text::printable(&c.task),
                c.limit,
                c.share,
                c.running
            ));
        }
    }
    out
}
