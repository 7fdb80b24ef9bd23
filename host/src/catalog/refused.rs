//! Refused deploys, recorded where every operator looks (`almanac status`, the dashboard):
//! the plugin files a serving host would not load, why, and which version keeps serving
//! instead. Each host owns its rows (host name and plugins folder) and replaces them after
//! every read of its folder; see `migrations/V17__refused_deploys.sql`.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::db::Sql;

/// How often a host with refusals says it still has them.
pub const HEARTBEAT: Duration = Duration::from_secs(60);

/// One refused file, as this host knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub digest: String,
    pub task: Option<String>,
    /// The version that keeps serving instead, if any.
    pub serving: Option<String>,
    pub reason: String,
}

/// A refused deploy as recorded, on any host.
#[derive(Debug, Clone, Serialize)]
pub struct RefusedDeploy {
    pub host: String,
    pub file: String,
    pub digest: String,
    pub task: Option<String>,
    pub serving: Option<String>,
    pub reason: String,
    pub refused_at: DateTime<Utc>,
    /// When its host last said it still refuses the file.
    pub seen_at: DateTime<Utc>,
    /// Its host has not said so for three heartbeats: killed or retired, not current.
    pub stale: bool,
}

/// Replace this host's rows for `dir` with `now`, all seen now (keeping when a file was
/// first refused, if its content is the same).
pub async fn record(client: &impl Sql, host: &str, dir: &str, now: &BTreeMap<PathBuf, Refused>) -> Result<(), tokio_postgres::Error> {
    let files: Vec<String> = now.keys().map(|p| p.display().to_string()).collect();
    let digests: Vec<&str> = now.values().map(|r| r.digest.as_str()).collect();
    // Empty for none: the statements' typed parameters take no NULLs in arrays.
    let tasks: Vec<&str> = now.values().map(|r| r.task.as_deref().unwrap_or_default()).collect();
    let serving: Vec<&str> = now.values().map(|r| r.serving.as_deref().unwrap_or_default()).collect();
    let reasons: Vec<&str> = now.values().map(|r| r.reason.as_str()).collect();
    client
        .exec(
            "WITH gone AS (
                 DELETE FROM almanac.refused_deploys d WHERE d.host = $1 AND d.dir = $2 AND d.file <> ALL ($3::text[])
             )
             INSERT INTO almanac.refused_deploys AS d (host, dir, file, digest, task, serving, reason)
             SELECT $1, $2, r.file, r.digest, nullif(r.task, ''), nullif(r.serving, ''), r.reason
             FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS r (file, digest, task, serving, reason)
             ON CONFLICT (host, dir, file) DO UPDATE
                SET refused_at = CASE WHEN d.digest = EXCLUDED.digest THEN d.refused_at ELSE now() END,
                    digest = EXCLUDED.digest, task = EXCLUDED.task, serving = EXCLUDED.serving,
                    reason = EXCLUDED.reason, seen_at = now()",
            &[&host, &dir, &files, &digests, &tasks, &serving, &reasons],
        )
        .await?;
    Ok(())
}

/// Every recorded refusal, current ones first.
pub async fn list(client: &impl Sql) -> Result<Vec<RefusedDeploy>, tokio_postgres::Error> {
    let rows = client
        .rows(
            "SELECT host, file, digest, task, serving, reason, refused_at, seen_at,
                    seen_at < now() - $1 * interval '1 second' AS stale
             FROM almanac.refused_deploys ORDER BY stale, task, host, file",
            &[&(3.0 * HEARTBEAT.as_secs_f64())],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| RefusedDeploy {
            host: r.get("host"),
            file: r.get("file"),
            digest: r.get("digest"),
            task: r.get("task"),
            serving: r.get("serving"),
            reason: r.get("reason"),
            refused_at: r.get("refused_at"),
            seen_at: r.get("seen_at"),
            stale: r.get("stale"),
        })
        .collect())
}

/// One line for a person: where, what, why, and what serves instead.
pub fn describe(d: &RefusedDeploy) -> String {
    let serving = match &d.serving {
        Some(version) => format!("version {version} keeps serving"),
        None => "nothing of it serves".into(),
    };
    let task = d.task.as_deref().map(|t| format!("task {t}, ")).unwrap_or_default();
    let when = d.refused_at.format("%Y-%m-%d %H:%M:%S");
    let stale = match d.stale {
        true => format!(" (STALE: its host has not reported since {} UTC; stopped or retired?)", d.seen_at.format("%Y-%m-%d %H:%M:%S")),
        false => String::new(),
    };
    // The file's name is whoever deployed it's, the reason may quote a plugin: as text.
    let text = crate::text::printable;
    format!("{} on {} ({task}since {when} UTC; {serving}): {}{stale}", text(&d.file), text(&d.host), text(&d.reason))
}
