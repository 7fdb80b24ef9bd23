//! The outbox dispatcher: claim -> deliver -> record -> commit.
//!
//! Plugins publish messages into `almanac.outbox` inside their jobs' transactions
//! ([`crate::capability::outbox`]); a message exists only if its job committed. The
//! dispatcher claims due pending messages of the topics that have a sink
//! (`FOR UPDATE SKIP LOCKED`), delivers them, and marks each delivered or records the
//! failed attempt (attempts, last error, next try with backoff and jitter; `dead` once
//! the topic's retry budget in time is spent, after its `max_attempts` if it sets one, or
//! at once for a permanent refusal), then commits. Each topic has a circuit breaker
//! shared by every host (`breaker`), and may be paused.
//!
//! The row lock is held during delivery, so hosts dispatching side by side never
//! deliver one message at the same time. Delivery is at least once: a host that dies
//! after the receiver took a message but before its COMMIT leaves the message pending,
//! and it is delivered again with the same `Idempotency-Key`. Receivers must dedupe.
mod breaker;
pub mod config;
pub mod message;
pub mod operate;
pub mod sink;
pub mod webhook;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::db::{Conn, Pool};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use config::{Breaker, Reply, SinkSpec, TopicSpec, Topics};
pub use sink::{Delivered, Message};
use sink::{Sink, SinkError};

use crate::db::Sql;

const CLAIM: &str = include_str!("claim.sql");
const MARK_DELIVERED: &str = include_str!("mark_delivered.sql");
const MARK_FAILED: &str = include_str!("mark_failed.sql");
const UNROUTED: &str = include_str!("unrouted.sql");
const REPLY: &str = include_str!("reply.sql");
const NOTE_REPLY_FAILED: &str = include_str!("note_reply_failed.sql");

/// How many idle polls pass between looks for pending messages no sink will take.
const UNROUTED_EVERY_POLLS: u32 = 20;

/// Dispatcher settings (`almanac run --outbox-*`).
#[derive(Debug, Clone)]
pub struct Options {
    /// Polling interval when idle and no notification arrives. Defaults to 1 s.
    pub poll_interval: Duration,
    /// First retry delay; doubles per attempt, with jitter. Defaults to 1 s.
    pub retry_base: Duration,
    /// Longest retry delay. Defaults to 1 h.
    pub retry_max: Duration,
    /// Concurrent dispatch workers, each borrowing a connection per round (the host's
    /// pool grows by this many when any topic has a sink). Defaults to 4.
    pub workers: usize,
    /// Messages one worker claims per transaction and delivers concurrently. Defaults
    /// to 1: a larger batch saves commits, but its slowest delivery holds the others'
    /// records back (and their row locks) until it ends.
    pub batch: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { poll_interval: Duration::from_secs(1), retry_base: Duration::from_secs(1), retry_max: Duration::from_secs(3600), workers: 4, batch: 1 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error(transparent)]
    Sink(#[from] sink::BuildError),
}

struct Route {
    sink: Arc<dyn Sink>,
    retry_for: Duration,
    max_attempts: Option<u32>,
    reply: Option<Reply>,
}

/// What one claim-deliver-commit round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RoundOutcome {
    pub claimed: usize,
    pub delivered: usize,
    pub failed: usize,
    pub dead: usize,
}

/// The dispatcher of one host.
pub struct Dispatcher {
    routes: HashMap<String, Route>,
    breakers: HashMap<String, Breaker>,
    /// The routed topics, as the claim's parameter.
    topics: Vec<String>,
    pub options: Options,
}

impl Dispatcher {
    /// Build every configured topic's sink.
    pub fn new(topics: &Topics, options: Options) -> Result<Dispatcher, DispatchError> {
        let mut routes = HashMap::new();
        for (topic, spec) in topics {
            routes.insert(
                topic.clone(),
                Route { sink: build(&spec.sink)?, retry_for: spec.retry_for, max_attempts: spec.max_attempts, reply: spec.reply.clone() },
            );
        }
        let breakers = topics.iter().map(|(topic, spec)| (topic.clone(), spec.breaker)).collect();
        let topics = topics.keys().cloned().collect();
        Ok(Dispatcher { routes, breakers, topics, options })
    }

    /// The topics with a sink.
    pub fn topics(&self) -> &[String] {
        &self.topics
    }

    /// Dispatch with `options.workers` workers until `shutdown`; rounds in flight finish
    /// first (each delivery is bounded by its sink's timeout). Workers borrow a
    /// connection from a pool of the dispatcher's own (so dispatching and the executor
    /// never wait on each other's connections) for one round at a time: an idle
    /// dispatcher holds none.
    pub async fn run(self, target: crate::db::Target, listen: Option<crate::db::Target>, shutdown: CancellationToken) {
        let this = Arc::new(self);
        let (wake_tx, wake) = watch::channel(0u64);
        // Kept until the end, so that without a listener `changed()` waits instead of
        // failing at once.
        let mut wake_tx = Some(wake_tx);
        let mut running = tokio::task::JoinSet::new();
        let workers = if this.topics.is_empty() {
            // Nothing to deliver: one worker that only reports topics waiting for a sink.
            1
        } else {
            if let Some(listen) = listen {
                if let Some(tx) = wake_tx.take() {
                    running.spawn(crate::wake::listen(listen, vec![(crate::wake::OUTBOX, tx)], shutdown.clone()));
                }
            }
            this.options.workers.max(1)
        };
        let pool = match crate::db::Pool::new(&target.role("dispatcher"), workers) {
            Ok(pool) => pool,
            Err(e) => {
                tracing::error!("the outbox dispatcher cannot start: {e}");
                return;
            }
        };
        for id in 0..workers {
            running.spawn(this.clone().work(id, pool.clone(), wake.clone(), shutdown.clone()));
        }
        while running.join_next().await.is_some() {}
        drop(wake_tx);
    }

    async fn work(self: Arc<Self>, id: usize, pool: Pool, mut wake: watch::Receiver<u64>, shutdown: CancellationToken) {
        let mut idle = Duration::from_millis(10);
        // Worker 0 alone looks for topics without a sink, so each is reported once.
        let mut warned = (id == 0).then(HashSet::new);
        let mut polls_since_check = UNROUTED_EVERY_POLLS;
        while !shutdown.is_cancelled() {
            // Seen before the round looks: one arriving meanwhile ends the idle wait.
            wake.borrow_and_update();
            let check_due = warned.is_some() && polls_since_check >= UNROUTED_EVERY_POLLS;
            let outcome = if self.topics.is_empty() && !check_due {
                Ok(RoundOutcome::default())
            } else {
                let Ok(conn) = crate::db::connect(&pool, &shutdown).await else { break };
                let round = async {
                    let outcome = self.round(&conn).await?;
                    if let Some(warned) = warned.as_mut().filter(|_| outcome.claimed == 0 && check_due) {
                        polls_since_check = 0;
                        self.report_unrouted(&conn, warned).await?;
                    }
                    Ok::<_, DispatchError>(outcome)
                };
                let outcome = round.await;
                if outcome.is_err() {
                    // It may be mid-transaction: close it rather than return it to the pool.
                    conn.close();
                }
                outcome
            };
            match outcome {
                Ok(outcome) if outcome.claimed > 0 => idle = Duration::from_millis(10),
                Ok(_) => {
                    polls_since_check += 1;
                    let _ = crate::wake::idle(&mut wake, &mut idle, self.options.poll_interval, &shutdown).await;
                }
                Err(e) => {
                    tracing::warn!(worker = id, "outbox dispatcher lost its database connection, reconnecting: {}", crate::db::error_chain(&e));
                    tokio::select! {
                        _ = tokio::time::sleep(self.options.poll_interval) => {}
                        _ = shutdown.cancelled() => {}
                    }
                }
            }
        }
    }

    /// One transaction: plan by the topics' breakers, claim due messages (and a probe per
    /// topic whose circuit is open and cooled), deliver them concurrently, record, commit.
    pub async fn round(&self, conn: &Conn) -> Result<RoundOutcome, DispatchError> {
        let mut outcome = RoundOutcome::default();
        if self.topics.is_empty() {
            return Ok(outcome);
        }
        // Until its COMMIT: dropped before (a panic), the connection is closed with its
        // locks and marks, not lent again.
        conn.in_transaction(true);
        conn.batch_execute("BEGIN").await?;
        let plan = breaker::plan(conn, &self.breakers, &self.topics).await?;
        let mut rows = plan.probes;
        if !plan.deliver.is_empty() {
            rows.extend(conn.rows(CLAIM, &[&plan.deliver, &(self.options.batch.max(1) as i64)]).await?);
        }
        outcome.claimed = rows.len();
        let messages: Vec<Message> = rows
            .iter()
            .map(|r| Message {
                id: r.get("id"),
                topic: r.get("topic"),
                key: r.get("key"),
                payload: r.get("payload"),
                content_type: r.get("content_type"),
                attempt: u32::try_from(r.get::<_, i32>("attempts")).unwrap_or(0) + 1,
                task: r.get("task"),
                created_at: r.get("created_at"),
            })
            .collect();
        let results = futures_util::future::join_all(messages.iter().map(|m| self.deliver(m))).await;
        let mut tallies: BTreeMap<String, breaker::Tally> = BTreeMap::new();
        let mut delivered = Vec::new();
        let mut replies = Vec::new();
        let (mut failed, mut errors, mut give_up, mut delays, mut budgets) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (message, result) in messages.iter().zip(results) {
            let tally = tallies.entry(message.topic.clone()).or_default();
            match result {
                Ok(answer) => {
                    tracing::debug!(topic = %message.topic, key = %message.key, attempt = message.attempt, "outbox message delivered");
                    tally.delivered += 1;
                    delivered.push(message.id);
                    if let Some(reply) = self.routes.get(&message.topic).and_then(|r| r.reply.as_ref()) {
                        replies.push((reply.task.clone(), message, reply_payload(message, &answer, &reply.headers)));
                    }
                }
                Err(e) => {
                    let route = self.routes.get(&message.topic);
                    let out_of_attempts = route.and_then(|r| r.max_attempts).is_some_and(|max| message.attempt >= max);
                    let delay = crate::backoff::delay(self.options.retry_base, self.options.retry_max, message.attempt);
                    // One line per attempt only at debug: an outage is told by the breaker.
                    tracing::debug!(topic = %message.topic, key = %message.key, attempt = message.attempt, error = %e, retry_in = ?delay, "outbox delivery failed");
                    if e.retryable {
                        tally.failed += 1;
                        tally.last_error = e.message.clone();
                    }
                    failed.push(message.id);
                    errors.push(e.message);
                    give_up.push(!e.retryable || out_of_attempts);
                    delays.push(delay.as_secs_f64());
                    budgets.push(route.map_or(config::DEFAULT_RETRY_FOR, |r| r.retry_for).as_secs_f64());
                }
            }
        }
        outcome.delivered = delivered.len();
        outcome.failed = failed.len();
        if !delivered.is_empty() {
            conn.exec(MARK_DELIVERED, &[&delivered]).await?;
        }
        for (task, message, payload) in &replies {
            self.reply(conn, task, message, payload).await?;
        }
        if !failed.is_empty() {
            for row in conn.rows(MARK_FAILED, &[&failed, &errors, &give_up, &delays, &budgets]).await? {
                if row.get::<_, bool>("dead") {
                    outcome.dead += 1;
                    let id: i64 = row.get("id");
                    let why = match failed.iter().position(|f| *f == id).is_some_and(|at| give_up[at]) {
                        true => "the receiver refused it for good, or it is out of attempts",
                        false => "its retry budget (retry_for) is spent",
                    };
                    tracing::warn!(topic = %row.get::<_, String>("topic"), key = %row.get::<_, String>("key"), "outbox message dead: {why}");
                }
            }
        }
        breaker::record(conn, &self.breakers, &tallies).await?;
        conn.batch_execute("COMMIT").await?;
        conn.in_transaction(false);
        Ok(outcome)
    }

    /// The reply job of a delivered message, under a savepoint: a reply that cannot be
    /// made (its task unknown here, not allowed, a body the database refuses) must not undo
    /// the delivery and send the message again forever. The message stays delivered, its
    /// `last_error` says the reply was not recorded, and the log says why.
    async fn reply(&self, conn: &Conn, task: &String, message: &Message, payload: &serde_json::Value) -> Result<(), DispatchError> {
        conn.batch_execute("SAVEPOINT reply").await?;
        match conn.opt(REPLY, &[task, &message.created_at, &message.key, payload]).await {
            Ok(row) => {
                conn.batch_execute("RELEASE SAVEPOINT reply").await?;
                if row.is_some_and(|r| !r.get::<_, bool>(0)) {
                    tracing::warn!(topic = %message.topic, key = %message.key, %task, "outbox reply not made: the reply task already has a job of this key and slot");
                }
            }
            Err(e) => {
                conn.batch_execute("ROLLBACK TO SAVEPOINT reply").await?;
                let why = format!("delivered; its reply to task {task} was not recorded: {}", crate::db::error_chain(&e));
                tracing::error!(topic = %message.topic, key = %message.key, "outbox {why}");
                conn.exec(NOTE_REPLY_FAILED, &[&message.id, &why]).await?;
            }
        }
        Ok(())
    }

    async fn deliver(&self, message: &Message) -> Result<Delivered, SinkError> {
        match self.routes.get(&message.topic) {
            Some(route) => route.sink.deliver(message).await,
            // The claim only returns routed topics; this is the belt to its braces.
            None => Err(SinkError::retryable(format!("no sink is configured for topic {:?}", message.topic))),
        }
    }

    /// Say once per topic that its messages wait for a sink. They are left pending, not
    /// marked dead: the fix is configuration, after which they are delivered.
    async fn report_unrouted(&self, conn: &Conn, warned: &mut HashSet<String>) -> Result<(), DispatchError> {
        let known: Vec<String> = self.topics.iter().chain(warned.iter()).cloned().collect();
        for row in conn.rows(UNROUTED, &[&known]).await? {
            let topic: String = row.get(0);
            let pending: i64 = row.get(1);
            tracing::warn!(
                topic = %topic,
                pending,
                "outbox topic {topic:?} has pending messages but no sink is configured for it; they stay pending until \
                 almanac.toml has [outbox.topics.{topic}] and a host is restarted with it"
            );
            warned.insert(topic);
        }
        Ok(())
    }
}

/// A reply job's payload: which message, and what the receiver answered (the headers the
/// topic names; the body as text, invalid UTF-8 replaced).
fn reply_payload(message: &Message, answer: &Delivered, named: &[String]) -> serde_json::Value {
    let headers: serde_json::Map<String, serde_json::Value> =
        answer.headers.iter().filter(|(name, _)| named.contains(name)).map(|(name, value)| (name.clone(), value.clone().into())).collect();
    serde_json::json!({
        "topic": message.topic,
        "key": message.key,
        "message_id": message.id,
        "status": answer.status,
        "headers": headers,
        // JSON text may hold any character but NUL, which jsonb refuses.
        "body": String::from_utf8_lossy(&answer.body).replace('\0', "\u{FFFD}"),
        "body_truncated": answer.truncated,
    })
}

/// Build the sink a topic is configured with.
fn build(spec: &config::SinkSpec) -> Result<Arc<dyn Sink>, DispatchError> {
    Ok(match spec {
        config::SinkSpec::Webhook { url, timeout, ca_file } => Arc::new(webhook::Webhook::new(url, *timeout, ca_file.as_deref())?),
        config::SinkSpec::Log => Arc::new(sink::LogSink),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idempotency_key_is_topic_slash_key() {
        let m = Message {
            id: 1,
            topic: "points-awarded".into(),
            key: "points-notify/2026-03-07T16:00:00Z/17".into(),
            payload: vec![],
            content_type: "application/json".into(),
            attempt: 1,
            task: None,
            created_at: chrono::Utc::now(),
        };
        assert_eq!(m.idempotency_key(), "points-awarded/points-notify/2026-03-07T16:00:00Z/17");
    }

    #[tokio::test]
    async fn the_log_sink_always_delivers() {
        let m = Message {
            id: 1,
            topic: "t".into(),
            key: "k".into(),
            payload: b"{}".to_vec(),
            content_type: "application/json".into(),
            attempt: 1,
            task: None,
            created_at: chrono::Utc::now(),
        };
        assert!(sink::LogSink.deliver(&m).await.is_ok());
    }

    #[tokio::test]
    async fn a_webhook_nobody_listens_on_is_a_retryable_failure() {
        // Bind and drop a listener to get a port that refuses connections.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let hook = webhook::Webhook::new(&format!("http://127.0.0.1:{port}/hook"), Duration::from_secs(2), None).unwrap();
        let m = Message {
            id: 1,
            topic: "t".into(),
            key: "k".into(),
            payload: vec![],
            content_type: "text/plain".into(),
            attempt: 1,
            task: None,
            created_at: chrono::Utc::now(),
        };
        let e = hook.deliver(&m).await.unwrap_err();
        assert!(e.retryable && e.status.is_none(), "{e:?}");
    }
}
