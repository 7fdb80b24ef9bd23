//! The operator's view of the outbox: listing messages, sending dead ones back, pausing
//! a topic, delivering now, recalling what is not delivered yet, and the counts and
//! topic health `almanac status` and /metrics show.
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Client;

use crate::db::Sql;

const LIST: &str = include_str!("list.sql");
const RETRY: &str = include_str!("retry.sql");
const COUNTS: &str = include_str!("counts.sql");
const BIND_PUBLISHERS: &str = include_str!("bind_publishers.sql");
const BIND_TOPIC: &str = include_str!("bind_topic.sql");
const TOPICS: &str = include_str!("topics.sql");
const PAUSE: &str = include_str!("pause.sql");
const DELIVER_NOW: &str = include_str!("deliver_now.sql");
const DISCARD: &str = include_str!("discard.sql");

/// Record each topic `almanac.toml` names as configured (`almanac_job.publish` refuses a
/// topic no host configured), with the tasks that may publish on it when it names them
/// (`almanac_job.publish` refuses the others).
pub async fn bind_publishers(client: &impl Sql, topics: &super::config::Topics) -> Result<(), tokio_postgres::Error> {
    for (topic, spec) in topics.iter() {
        if spec.publishers.is_empty() {
            // Until one publishes, any plugin could be first and own it.
            if client.one(BIND_TOPIC, &[topic]).await?.get::<_, bool>(0) {
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

pub async fn list(
    client: &Client,
    status: Option<&str>,
    topic: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<MessageRow>, tokio_postgres::Error> {
    Ok(client
        .rows(LIST, &[&status, &topic, &limit, &before])
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

/// Dead messages (optionally of one topic / key) back to pending, recorded; returns how
/// many. `key` is a message's key or its `Idempotency-Key`.
pub async fn retry(client: &Client, topic: Option<&str>, key: Option<&str>, origin: &str) -> Result<u64, tokio_postgres::Error> {
    let n = count(client.one(RETRY, &[&topic, &key, &origin]).await?);
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

/// One topic's health.
#[derive(Debug, Clone, Serialize)]
pub struct TopicHealth {
    pub topic: String,
    pub paused: bool,
    pub paused_reason: Option<String>,
    /// Since when its circuit is open (None: closed).
    pub opened_at: Option<DateTime<Utc>>,
    /// Deliveries that failed in a row.
    pub failures: i32,
    /// Every failed delivery, ever.
    pub failures_total: i64,
    pub last_error: Option<String>,
    pub pending: i64,
    /// Seconds since the oldest pending message was published.
    pub oldest_pending_seconds: Option<f64>,
}

pub async fn topics(client: &impl Sql) -> Result<Vec<TopicHealth>, tokio_postgres::Error> {
    Ok(client
        .rows(TOPICS, &[])
        .await?
        .iter()
        .map(|r| TopicHealth {
            topic: r.get("topic"),
            paused: r.get("paused"),
            paused_reason: r.get("paused_reason"),
            opened_at: r.get("opened_at"),
            failures: r.get("failures"),
            failures_total: r.get("failures_total"),
            last_error: r.get("last_error"),
            pending: r.get("pending"),
            oldest_pending_seconds: r.get("oldest_s"),
        })
        .collect())
}

/// Pause or resume `topic` on every host, recorded; false if no such topic is known.
pub async fn set_paused(client: &Client, topic: &str, paused: bool, reason: Option<&str>, origin: &str) -> Result<bool, tokio_postgres::Error> {
    let found = client.opt(PAUSE, &[&topic, &paused, &reason, &origin]).await?.is_some();
    if found && !paused {
        client.exec("SELECT pg_notify($1, '')", &[&crate::wake::OUTBOX]).await?;
    }
    Ok(found)
}

/// `topic`'s pending messages (or the one keyed `key`) due now, its circuit closed;
/// recorded; returns how many messages. `key` is a message's key or its `Idempotency-Key`.
pub async fn deliver_now(client: &Client, topic: &str, key: Option<&str>, origin: &str) -> Result<u64, tokio_postgres::Error> {
    let n = count(client.one(DELIVER_NOW, &[&topic, &key, &origin]).await?);
    client.exec("SELECT pg_notify($1, '')", &[&crate::wake::OUTBOX]).await?;
    Ok(n)
}

/// Recall `topic`'s messages not yet delivered (or the one whose key or `Idempotency-Key`
/// is `key`), recording why; returns how many.
pub async fn discard(client: &Client, topic: &str, key: Option<&str>, reason: &str, origin: &str) -> Result<u64, tokio_postgres::Error> {
    Ok(count(client.one(DISCARD, &[&topic, &key, &reason, &origin]).await?))
}

fn count(row: tokio_postgres::Row) -> u64 {
    u64::try_from(row.get::<_, i64>(0)).unwrap_or_default()
}
