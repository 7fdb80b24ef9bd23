//! The operator's view of the outbox: listing messages, sending dead ones back, and the
//! counts `almanac status` shows.
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Client;

use crate::db::Sql;

const LIST: &str = include_str!("list.sql");
const RETRY: &str = include_str!("retry.sql");
const COUNTS: &str = include_str!("counts.sql");
const BIND_PUBLISHERS: &str = include_str!("bind_publishers.sql");

/// Record which tasks may publish on each topic `almanac.toml` names publishers for
/// (`almanac_job.publish` refuses the others).
pub async fn bind_publishers(client: &impl Sql, topics: &super::config::Topics) -> Result<(), tokio_postgres::Error> {
    for (topic, spec) in topics.iter() {
        if spec.publishers.is_empty() {
            // Until one publishes, any plugin could be first and own it.
            if client.opt("SELECT 1 FROM almanac.outbox_topics WHERE topic = $1", &[topic]).await?.is_none() {
                tracing::warn!(%topic, "outbox topic names no publishers and has none yet: the first task to publish on it will own it; name them with publishers = [...]");
            }
            continue;
        }
        client.exec(BIND_PUBLISHERS, &[topic, &spec.publishers]).await?;
    }
    Ok(())
}

/// One message as `almanac outbox` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct MessageRow {
    pub id: i64,
    pub topic: String,
    pub key: String,
    pub status: String,
    pub attempts: i32,
    /// The task whose job published it.
    pub task: Option<String>,
    pub content_type: String,
    pub bytes: i64,
    /// The first 200 bytes of the payload, as text (invalid UTF-8 replaced).
    pub payload_preview: String,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: DateTime<Utc>,
    pub dispatched_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

pub async fn list(client: &Client, status: Option<&str>, topic: Option<&str>, limit: i64) -> Result<Vec<MessageRow>, tokio_postgres::Error> {
    Ok(client
        .rows(LIST, &[&status, &topic, &limit])
        .await?
        .iter()
        .map(|r| MessageRow {
            id: r.get(0),
            topic: r.get(1),
            key: r.get(2),
            status: r.get(3),
            attempts: r.get(4),
            task: r.get(5),
            content_type: r.get(6),
            bytes: r.get(7),
            payload_preview: String::from_utf8_lossy(r.get::<_, &[u8]>(8)).into_owned(),
            created_at: r.get(9),
            next_attempt_at: r.get(10),
            dispatched_at: r.get(11),
            last_error: r.get(12),
        })
        .collect())
}

/// Dead messages (optionally of one topic / key) back to pending; returns how many.
pub async fn retry(client: &Client, topic: Option<&str>, key: Option<&str>) -> Result<u64, tokio_postgres::Error> {
    let n = client.exec(RETRY, &[&topic, &key]).await?;
    if n > 0 {
        // The insert trigger only fires for new messages; wake the dispatchers here.
        client.exec("SELECT pg_notify($1, '')", &[&crate::wake::OUTBOX]).await?;
    }
    Ok(n)
}

/// Messages of one publishing task, by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub pending: i64,
    pub dead: i64,
    pub delivered: i64,
}

/// Counts per publishing task; messages written without a task are under `None`.
pub async fn counts(client: &Client) -> Result<HashMap<Option<String>, Counts>, tokio_postgres::Error> {
    Ok(client.rows(COUNTS, &[]).await?.iter().map(|r| (r.get(0), Counts { pending: r.get(1), dead: r.get(2), delivered: r.get(3) })).collect())
}
