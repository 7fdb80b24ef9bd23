//! The operator's tools on the schedule table: read a schedule, list them, pause and
//! resume, move a cursor, forget a task; each change recorded (see [`super::applied`]),
//! and read back (`almanac changes`).
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Client;

use crate::db::Sql;

const SCHEDULE_OF: &str = include_str!("schedule_of.sql");
const HORIZON: &str = include_str!("horizon.sql");
const LEDGER: &str = include_str!("ledger.sql");
const PERIOD_OF: &str = include_str!("period_of.sql");
const SLOT_HANDLED: &str = include_str!("slot_handled.sql");
const LIST_SCHEDULES: &str = include_str!("list_schedules.sql");
const SET_PAUSED: &str = include_str!("set_paused.sql");
const SET_HELD: &str = include_str!("set_held.sql");
const SET_CURSOR: &str = include_str!("set_cursor.sql");
const FORGET: &str = include_str!("forget.sql");
const LIST_CHANGES: &str = include_str!("list_changes.sql");
const UNSETTLED: &str = include_str!("unsettled.sql");

/// One row of `almanac.schedules`.
#[derive(Debug, Clone)]
pub struct ScheduleRow {
    pub task: String,
    /// None: on demand.
    pub cron: Option<String>,
    pub zone: String,
    pub catch_up: String,
    pub paused: bool,
    pub generated_through: DateTime<Utc>,
    /// The business calendar's source, if any (crate::calendar::source).
    pub business: Option<serde_json::Value>,
}

impl ScheduleRow {
    /// The schedule it stores (None: on demand, or unreadable here).
    pub fn schedule(&self) -> Option<crate::calendar::Schedule> {
        stored_schedule(self.cron.as_deref(), &self.zone, self.business.clone()).ok().flatten()
    }
}

/// One task's stored schedule: cron (None: on demand), zone, business calendar source,
/// and the tasks whose jobs of a period come first (`after`).
pub struct Stored {
    pub cron: Option<String>,
    pub zone: String,
    pub business: Option<serde_json::Value>,
    pub after: Vec<String>,
    /// The end of the last period its scheduler handled.
    pub cursor: DateTime<Utc>,
}

impl Stored {
    /// The schedule every host runs by (None: on demand); an error if this version of
    /// Almanac cannot read it.
    pub fn schedule(&self) -> Result<Option<crate::calendar::Schedule>, String> {
        stored_schedule(self.cron.as_deref(), &self.zone, self.business.clone())
    }
}

/// The stored schedule of `task`, if it is registered.
pub async fn schedule_of(client: &impl Sql, task: &str) -> Result<Option<Stored>, tokio_postgres::Error> {
    Ok(client.opt(SCHEDULE_OF, &[&task]).await?.map(|r| Stored { cron: r.get(0), zone: r.get(1), business: r.get(2), after: r.get(3), cursor: r.get(4) }))
}

/// Which of `periods` the tasks of `after` have not settled yet (almanac.settled, V25):
/// a job of those periods waits.
pub async fn unsettled(client: &impl Sql, after: &[String], periods: &[String]) -> Result<std::collections::HashSet<String>, tokio_postgres::Error> {
    Ok(client.rows(UNSETTLED, &[&after, &periods]).await?.iter().map(|r| r.get(0)).collect())
}

/// How far back a backfill of `task` may reach, if it is registered.
pub async fn horizon(client: &impl Sql, task: &str) -> Result<Option<std::time::Duration>, tokio_postgres::Error> {
    Ok(client.opt(HORIZON, &[&task]).await?.map(|r| std::time::Duration::from_secs_f64(r.get::<_, f64>(0).max(0.0))))
}

/// One period in the ledger (`almanac.slots`).
#[derive(Debug, Clone)]
pub struct Period {
    pub period: String,
    /// The instant its jobs are keyed under.
    pub slot: DateTime<Utc>,
    /// generated, skipped or enqueued.
    pub status: String,
    pub reason: Option<String>,
    /// The schedule revision it was handled under (None: before migration V11 knew).
    pub revision: Option<i64>,
}

/// Whether the ledger keys a period of `task` under instant `slot` (one generated,
/// skipped or enqueued into, under this calendar or an older one).
pub async fn is_keyed(client: &impl Sql, task: &str, slot: DateTime<Utc>) -> Result<bool, tokio_postgres::Error> {
    Ok(client.one(SLOT_HANDLED, &[&task, &slot]).await?.get(0))
}

/// The stored period unit of `task`, if it is registered.
pub async fn period_of(client: &impl Sql, task: &str) -> Result<Option<crate::calendar::Period>, tokio_postgres::Error> {
    Ok(client.opt(PERIOD_OF, &[&task]).await?.and_then(|r| r.get::<_, String>(0).parse().ok()))
}

/// The ledger's rows of `task` for `periods` or keyed at `instants`.
pub async fn ledger(client: &impl Sql, task: &str, periods: &[String], instants: &[DateTime<Utc>]) -> Result<Vec<Period>, tokio_postgres::Error> {
    Ok(client
        .rows(LEDGER, &[&task, &periods, &instants])
        .await?
        .iter()
        .map(|r| Period { period: r.get(0), slot: r.get(1), status: r.get(2), reason: r.get(3), revision: r.get(4) })
        .collect())
}

/// Every schedule, by task.
pub async fn list(client: &Client) -> Result<Vec<ScheduleRow>, tokio_postgres::Error> {
    let rows = client.rows(LIST_SCHEDULES, &[]).await?;
    Ok(rows
        .iter()
        .map(|r| ScheduleRow {
            task: r.get(0),
            cron: r.get(1),
            zone: r.get(2),
            catch_up: r.get(3),
            paused: r.get(4),
            generated_through: r.get(5),
            business: r.get(6),
        })
        .collect())
}

/// Pause or resume `task`, recorded; the flag it had, None if it has no schedule.
pub async fn set_paused(client: &Client, task: &str, paused: bool, origin: &str, reason: Option<&str>) -> Result<Option<bool>, tokio_postgres::Error> {
    Ok(client.opt(SET_PAUSED, &[&task, &paused, &origin, &reason]).await?.map(|r| r.get(0)))
}

/// Hold `task`'s jobs (none starts on any host) or release them, recorded; what it was
/// and the task's pending jobs, None if it has no schedule.
pub async fn set_held(client: &Client, task: &str, held: bool, origin: &str, reason: Option<&str>) -> Result<Option<(bool, i64)>, tokio_postgres::Error> {
    Ok(client.opt(SET_HELD, &[&task, &held, &origin, &reason]).await?.map(|r| (r.get(0), r.get(1))))
}

/// Set `task`'s cursor, recorded; the cursor it had, None if it has no schedule.
pub async fn set_cursor(
    client: &Client,
    task: &str,
    cursor: DateTime<Utc>,
    origin: &str,
    reason: Option<&str>,
) -> Result<Option<DateTime<Utc>>, tokio_postgres::Error> {
    Ok(client.opt(SET_CURSOR, &[&task, &cursor, &origin, &reason]).await?.map(|r| r.get(0)))
}

/// Delete `task`'s schedule (and its plugins row), recorded; false if it had none.
/// Its jobs stay: done and discarded ones are the evidence a backfill relies on.
pub async fn forget(client: &Client, task: &str, origin: &str, reason: Option<&str>) -> Result<bool, tokio_postgres::Error> {
    Ok(client.one(FORGET, &[&task, &origin, &reason]).await?.get::<_, i64>(0) == 1)
}

/// A stored business source (`almanac.schedules.business`).
pub(super) fn source_of(value: serde_json::Value) -> Result<crate::calendar::source::BusinessSource, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// The schedule a stored record means: `cron` in `zone`, with the business calendar
/// built from its stored source. None: on demand.
pub fn stored_schedule(cron: Option<&str>, zone: &str, business: Option<serde_json::Value>) -> Result<Option<crate::calendar::Schedule>, String> {
    let Some(cron) = cron else { return Ok(None) };
    let schedule = crate::calendar::Schedule::new(cron, zone).map_err(|e| e.to_string())?;
    let Some(business) = business else { return Ok(Some(schedule)) };
    schedule.with_business(&source_of(business)?).map(Some).map_err(|e| e.to_string())
}

/// One row of `almanac.changes`: who changed what, from where, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub id: i64,
    pub task: Option<String>,
    pub topic: Option<String>,
    pub revision: i64,
    pub action: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
    pub by_role: String,
    pub origin: String,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

/// The latest `limit` changes, newest first, optionally of one task or topic, and older
/// than change `before`.
pub async fn changes(
    client: &impl Sql,
    task: Option<&str>,
    topic: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Change>, tokio_postgres::Error> {
    Ok(client
        .rows(LIST_CHANGES, &[&task, &topic, &limit, &before])
        .await?
        .iter()
        .map(|r| Change {
            id: r.get(0),
            task: r.get(1),
            topic: r.get(2),
            revision: r.get(3),
            action: r.get(4),
            before: r.get(5),
            after: r.get(6),
            by_role: r.get(7),
            origin: r.get(8),
            reason: r.get(9),
            at: r.get(10),
        })
        .collect())
}
