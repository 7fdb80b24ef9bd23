//! The operator's tools on the job table: what is running, listing jobs, sending failed
//! jobs back, discarding jobs that must never run (pruning is the history's: `history`).
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Client;

use crate::db::Sql;

const RUNNING: &str = include_str!("running.sql");
const JOBS: &str = include_str!("jobs.sql");
const RETRY: &str = include_str!("retry.sql");
const DISCARD: &str = include_str!("discard.sql");
const ATTEMPTS: &str = include_str!("attempts.sql");

/// Pending jobs locked by a worker right now, per task.
pub async fn running(client: &Client) -> Result<HashMap<String, i64>, tokio_postgres::Error> {
    Ok(client.rows(RUNNING, &[]).await?.iter().map(|r| (r.get(0), r.get(1))).collect())
}

#[derive(Debug, Clone, Serialize)]
pub struct JobRow {
    pub task: String,
    pub slot: DateTime<Utc>,
    pub key: String,
    pub status: String,
    pub attempts: i32,
    pub retries: i32,
    pub run_after: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub period: Option<String>,
}

impl JobRow {
    /// A row of `jobs.sql`'s columns (the console's lists read the same ones).
    pub fn from_row(r: &tokio_postgres::Row) -> JobRow {
        JobRow {
            task: r.get(0),
            slot: r.get(1),
            key: r.get(2),
            status: r.get(3),
            attempts: r.get(4),
            retries: r.get(5),
            run_after: r.get(6),
            completed_at: r.get(7),
            last_error: r.get(8),
            period: r.get(9),
        }
    }
}

/// Which jobs `almanac jobs` lists.
#[derive(Debug, Clone, Copy, Default)]
pub struct JobFilter<'a> {
    pub status: Option<&'a str>,
    pub task: Option<&'a str>,
    pub key: Option<&'a str>,
    pub key_prefix: Option<&'a str>,
}

pub async fn jobs(client: &Client, filter: JobFilter<'_>, limit: i64) -> Result<Vec<JobRow>, tokio_postgres::Error> {
    let JobFilter { status, task, key, key_prefix } = filter;
    Ok(client.rows(JOBS, &[&status, &task, &limit, &key, &key_prefix]).await?.iter().map(JobRow::from_row).collect())
}

/// Which of a task's jobs a retry or discard takes: every one, or those in one slot, of
/// one key, in a range of slots `[from, to)`, or any of these together.
#[derive(Debug, Default, Clone, Copy)]
pub struct Which<'a> {
    pub slot: Option<DateTime<Utc>>,
    pub key: Option<&'a str>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

impl Which<'_> {
    /// Nothing narrows it: every job of the task.
    pub fn is_every(&self) -> bool {
        self.slot.is_none() && self.key.is_none() && self.from.is_none() && self.to.is_none()
    }
}

/// Failed jobs of `task` that `which` takes back to pending; returns how many.
pub async fn retry(client: &Client, task: &str, which: Which<'_>, origin: &str) -> Result<u64, tokio_postgres::Error> {
    let Which { slot, key, from, to } = which;
    let retried = client.one(RETRY, &[&task, &slot, &key, &origin, &from, &to]).await?.get::<_, i64>(0) as u64;
    if retried > 0 {
        // Idle hosts sleep until a notification or their next job's time (executor::idle).
        client.exec("SELECT pg_notify($1, '')", &[&crate::wake::JOBS]).await?;
    }
    Ok(retried)
}

/// Mark the pending or failed jobs of `task` that `which` takes as discarded, so they
/// never run; recorded with `reason`. Returns how many.
pub async fn discard(client: &Client, task: &str, which: Which<'_>, origin: &str, reason: &str) -> Result<i64, tokio_postgres::Error> {
    let Which { slot, key, from, to } = which;
    Ok(client.one(DISCARD, &[&task, &slot, &key, &origin, &reason, &from, &to]).await?.get(0))
}

/// One recorded attempt of a job.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    pub slot: DateTime<Utc>,
    pub attempt: i32,
    /// `error`, `transient` or `crash`.
    pub kind: String,
    pub failed_at: DateTime<Utc>,
    pub error: String,
    /// The host that ran it (None before migration V31, or from an older host).
    pub host: Option<String>,
    /// The digest of the plugin that ran it.
    pub plugin_digest: Option<String>,
}

/// The attempt history of `task`'s jobs keyed `key` (in `slot`, or in every slot).
pub async fn attempts(client: &Client, task: &str, key: &str, slot: Option<DateTime<Utc>>, limit: i64) -> Result<Vec<AttemptRow>, tokio_postgres::Error> {
    Ok(client
        .rows(ATTEMPTS, &[&task, &key, &slot, &limit])
        .await?
        .iter()
        .map(|r| AttemptRow {
            slot: r.get(0),
            attempt: r.get(1),
            kind: r.get(2),
            failed_at: r.get(3),
            error: r.get(4),
            host: r.get(5),
            plugin_digest: r.get(6),
        })
        .collect())
}
