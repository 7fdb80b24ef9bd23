//! Each topic's circuit breaker, shared by every host through the topic's row in
//! `almanac.outbox_topics`. After `breaker_after` deliveries in a row fail (on any host)
//! the circuit opens: the topic's messages wait, and once per `breaker_cooldown` one
//! worker, holding a lock on the topic's row as a lease, sends one message as a probe. The first
//! success closes the circuit and makes every waiting message due at once; so an outage
//! of the receiver costs a few requests, not one per message and attempt, and one log
//! line when the circuit opens and one when it closes. A paused topic (`almanac outbox
//! pause`) is not delivered at all.
use std::collections::{BTreeMap, HashMap};

use tokio_postgres::{Error, Row};

use super::config::Breaker;
use crate::db::{Conn, Sql};

const TOPIC_STATES: &str = include_str!("topic_states.sql");
const PROBE: &str = include_str!("probe.sql");
const CLAIM_PROBE: &str = include_str!("claim_probe.sql");
const LOCK_TOPICS: &str = include_str!("lock_topics.sql");
const TOPIC_OUTCOME: &str = include_str!("topic_outcome.sql");
const RELEASE_WAITING: &str = include_str!("release_waiting.sql");
const CLOSE_IDLE: &str = include_str!("close_idle.sql");

/// What one round may do: claim due messages of `deliver`, and send the one message of
/// each topic in `probes`. A round that took a probe's lease (`leased`: the topic's row,
/// locked until it commits) sends its probes only: it took that row lock out of the topic
/// order every round records in, so it must not go on to lock other topics' rows, or two
/// rounds could each wait for the other's.
#[derive(Debug, Default)]
pub struct Plan {
    pub deliver: Vec<String>,
    pub probes: Vec<Row>,
    pub leased: bool,
}

/// The round's plan for the routed topics, in the round's transaction.
pub async fn plan(conn: &Conn, breakers: &HashMap<String, Breaker>, routed: &[String]) -> Result<Plan, Error> {
    let mut plan = Plan::default();
    let mut known = HashMap::new();
    for row in conn.rows(TOPIC_STATES, &[&routed]).await? {
        let (topic, paused, failures, cooled): (String, bool, i32, bool) = (row.get("topic"), row.get("paused"), row.get("failures"), row.get("cooled"));
        known.insert(topic, (paused, failures, cooled));
    }
    for topic in routed {
        let breaker = breakers.get(topic).copied().unwrap_or_default();
        match known.get(topic) {
            Some((true, _, _)) => {}
            Some((false, failures, cooled)) if *failures >= breaker.threshold() => {
                if *cooled && conn.opt(PROBE, &[topic]).await?.is_some() {
                    plan.leased = true;
                    match conn.opt(CLAIM_PROBE, &[topic]).await? {
                        Some(message) => plan.probes.push(message),
                        None => {
                            conn.opt(CLOSE_IDLE, &[topic]).await?;
                            tracing::info!(%topic, "outbox circuit closed: nothing waits to be delivered; the next message gets an ordinary try");
                        }
                    }
                }
            }
            _ => plan.deliver.push(topic.clone()),
        }
    }
    if plan.leased {
        plan.deliver.clear();
    }
    Ok(plan)
}

/// What a round's deliveries did to one topic.
#[derive(Debug, Default)]
pub struct Tally {
    pub delivered: i32,
    /// Failures that may pass (a receiver down, a timeout); a permanent refusal of one
    /// message says nothing about the receiver's health.
    pub failed: i32,
    pub last_error: String,
}

/// Record the round's tallies on the topics' breakers, before the round commits; log
/// and act on each circuit that opened or closed.
pub async fn record(conn: &Conn, breakers: &HashMap<String, Breaker>, tallies: &BTreeMap<String, Tally>) -> Result<(), Error> {
    if tallies.is_empty() {
        return Ok(());
    }
    let topics: Vec<String> = tallies.keys().cloned().collect();
    conn.rows(LOCK_TOPICS, &[&topics]).await?;
    let delivered: Vec<i32> = tallies.values().map(|t| t.delivered).collect();
    let failed: Vec<i32> = tallies.values().map(|t| t.failed).collect();
    let errors: Vec<String> = tallies.values().map(|t| t.last_error.clone()).collect();
    let of = |topic: &String| breakers.get(topic).copied().unwrap_or_default();
    let after: Vec<i32> = topics.iter().map(|t| of(t).threshold()).collect();
    let cooldown: Vec<f64> = topics.iter().map(|t| of(t).cooldown.as_secs_f64()).collect();
    let mut closed = Vec::new();
    for row in conn.rows(TOPIC_OUTCOME, &[&topics, &delivered, &failed, &errors, &after, &cooldown]).await? {
        let (topic, was_open, is_open): (String, bool, bool) = (row.get("topic"), row.get("was_open"), row.get("is_open"));
        match (was_open, is_open) {
            (false, true) => tracing::warn!(
                %topic,
                failures = row.get::<_, i32>("failures"),
                last_error = row.get::<_, Option<String>>("last_error").unwrap_or_default(),
                "outbox circuit opened: deliveries stop; one message probes the receiver every {:?} until one succeeds",
                of(&topic).cooldown
            ),
            (true, false) => {
                tracing::info!(%topic, "outbox circuit closed: the receiver took a message; the waiting ones are due now");
                closed.push(topic);
            }
            _ => {}
        }
    }
    if !closed.is_empty() {
        conn.exec(RELEASE_WAITING, &[&closed]).await?;
    }
    Ok(())
}
