//! A range of periods an operator asks for: a backfill's `[from, to)`, or the periods a
//! moved cursor lets the scheduler consider again. One rule for what may be asked (the
//! stored schedule, started periods only, the task's backfill horizon) and one preview of
//! what it would do, for both doors: `almanac backfill` / `almanac cursor` and the console.
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::calendar::Schedule;
use crate::db::Sql;

const LEDGER_BETWEEN: &str = include_str!("ledger_between.sql");

/// Periods a preview lists; the rest are counted.
pub const LISTED: usize = 100;
/// Periods a preview counts at most (a minutely schedule over a long range has millions).
const COUNTED: usize = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    #[error("{task} runs on demand: it has no periods to backfill; enqueue its jobs (almanac.enqueue, `almanac enqueue`)")]
    OnDemand { task: String },
    #[error(
        "{task}: this folder and file say cron {given:?} in {given_zone}, but the schedule every host runs by is cron {stored:?} in {stored_zone}; \
         a backfill generates by the stored one: `almanac apply` first, or make the file agree"
    )]
    Differs { task: String, given: String, given_zone: String, stored: String, stored_zone: String },
    #[error("the range's end {} is in the future; a backfill only generates periods that have started (the schedule does the rest)", utc(*.0))]
    Future(DateTime<Utc>),
    #[error("the range is empty: it starts at {} and ends at {}", utc(*.0), utc(*.1))]
    Empty(DateTime<Utc>, DateTime<Utc>),
    #[error(
        "{} is past {task}'s backfill horizon of {horizon} (the oldest period a backfill may reach starts at {}); a horizon keeps a \
         typo from re-running years: raise `horizon` for the task in almanac.toml and `almanac apply` if you mean it",
        utc(*from),
        utc(*oldest)
    )]
    PastHorizon { task: String, from: DateTime<Utc>, horizon: String, oldest: DateTime<Utc> },
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

fn utc(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// Whether `schedule` (the plugin's, as this host or file has it) may backfill `task`'s
/// periods in `[from, to)`: it is the stored schedule every host runs by, the range has
/// started, and it is within the task's horizon.
pub async fn check_backfill(
    client: &tokio_postgres::Client,
    task: &str,
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), RangeError> {
    if let Some(stored) = super::operate::schedule_of(client, task).await? {
        let source = |s: &Schedule| s.business_source().cloned();
        let stored_source = stored.schedule().ok().flatten().as_ref().and_then(source);
        if (stored.cron.as_deref(), stored.zone.as_str(), &stored_source) != (Some(schedule.cron()), schedule.zone().name(), &source(schedule)) {
            return Err(RangeError::Differs {
                task: task.to_owned(),
                given: schedule.cron().to_owned(),
                given_zone: schedule.zone().name().to_owned(),
                stored: stored.cron.unwrap_or_else(|| "(on demand)".into()),
                stored_zone: stored.zone,
            });
        }
    }
    if to <= from {
        return Err(RangeError::Empty(from, to));
    }
    let now = crate::db::server_now(client).await?;
    if to > now {
        return Err(RangeError::Future(to));
    }
    if let Some(horizon) = super::operate::horizon(client, task).await? {
        let oldest = now - Duration::from_std(horizon).unwrap_or(Duration::MAX);
        if from < oldest {
            let horizon = crate::task::format_duration(horizon);
            return Err(RangeError::PastHorizon { task: task.to_owned(), from, horizon, oldest });
        }
    }
    Ok(())
}

/// Whether the console may move `task`'s cursor from `cursor` to `to`: back no further
/// than the task's backfill horizon, as a backfill (a catch-up of every period since would
/// be one). `almanac cursor` is not bound by it: the operator at a shell owns the database.
pub async fn check_cursor(client: &tokio_postgres::Client, task: &str, cursor: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), RangeError> {
    if to >= cursor {
        return Ok(());
    }
    let now = crate::db::server_now(client).await?;
    if let Some(horizon) = super::operate::horizon(client, task).await? {
        let oldest = now - Duration::from_std(horizon).unwrap_or(Duration::MAX);
        if to < oldest {
            let horizon = crate::task::format_duration(horizon);
            return Err(RangeError::PastHorizon { task: task.to_owned(), from: to, horizon, oldest });
        }
    }
    Ok(())
}

/// What a backfill of `[from, to)`, or a cursor moved to `from` (then `to` is now), would
/// do: the periods in the range by the stored schedule, and which of them the ledger has
/// already (generated, skipped or enqueued into: passed over, never generated twice).
#[derive(Debug, Serialize)]
pub struct Preview {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Periods in the range (at most [`COUNTED`]; `more` says there are more).
    pub total: usize,
    pub more: bool,
    /// Of them, those the ledger lacks: what would be generated.
    pub new: usize,
    /// The first [`LISTED`] periods.
    pub periods: Vec<PreviewPeriod>,
}

#[derive(Debug, Serialize)]
pub struct PreviewPeriod {
    pub period: String,
    pub start: DateTime<Utc>,
    /// What the ledger says of it (generated, empty, skipped, enqueued), None: new.
    pub ledger: Option<String>,
}

pub async fn preview(client: &impl Sql, task: &str, schedule: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Preview, tokio_postgres::Error> {
    let mut slots = schedule.slots_after(from - Duration::microseconds(1)).take_while(|s| s.start < to);
    let listed: Vec<_> = slots.by_ref().take(LISTED).collect();
    let mut rest = slots.take(COUNTED - listed.len() + 1).peekable();
    // The periods past the listed ones are counted, and those of them the ledger has by
    // the range of instants they are keyed at.
    let rest_from = rest.peek().map(|s| s.start);
    let rest = rest.count();
    let labels: Vec<String> = listed.iter().map(|s| s.label.clone()).collect();
    let known = super::operate::ledger(client, task, &labels, &[]).await?;
    let periods: Vec<PreviewPeriod> = listed
        .iter()
        .map(|s| PreviewPeriod { period: s.label.clone(), start: s.start, ledger: known.iter().find(|p| p.period == s.label).map(|p| p.status.clone()) })
        .collect();
    let rest_known = match rest_from {
        Some(at) => client.one(LEDGER_BETWEEN, &[&task, &at, &to]).await?.get::<_, i64>(0) as usize,
        None => 0,
    };
    let total = (listed.len() + rest).min(COUNTED);
    let new = periods.iter().filter(|p| p.ledger.is_none()).count() + rest.min(COUNTED - listed.len()).saturating_sub(rest_known);
    Ok(Preview { from, to, total, more: listed.len() + rest > COUNTED, new, periods })
}

/// What moving a cursor from `cursor` to `to` would do. Back: the periods after `to`
/// that have started are considered again (the catch-up policy decides among the new
/// ones; those in the ledger are passed over). Forward: the periods up to `to` that
/// were not generated yet never will be.
#[derive(Debug, Serialize)]
pub struct CursorPreview {
    pub cursor: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub back: bool,
    pub periods: Preview,
}

pub async fn cursor_preview(
    client: &tokio_postgres::Client,
    task: &str,
    schedule: &Schedule,
    cursor: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<CursorPreview, tokio_postgres::Error> {
    let now = crate::db::server_now(client).await?;
    let after = |t: DateTime<Utc>| t + Duration::microseconds(1);
    let back = to < cursor;
    let (from, until) = if back { (after(to), after(now)) } else { (after(cursor), after(to.min(now))) };
    let periods = preview(client, task, schedule, from, until.max(from)).await?;
    Ok(CursorPreview { cursor, to, back, periods })
}
