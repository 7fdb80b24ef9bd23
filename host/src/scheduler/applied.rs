//! The applied schedule: one truth across hosts. A schedule (cron, zone, catch-up,
//! horizon) and the task's settings are stored once in `almanac.schedules` and changed only deliberately —
//! `almanac apply`, `cursor`, `pause`, `resume`, `forget` — each change recorded in
//! `almanac.changes` (who, when, from what to what) with a new revision. A host starting
//! registers a schedule that does not exist yet and never changes one that does: when
//! its plugin and file say otherwise, it does not serve that task and says why. A
//! running host follows the stored schedule, logging every change it sees.
use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use std::sync::Arc;

use super::operate::{source_of, stored_schedule};
use crate::calendar::business::Business;
use crate::calendar::{Period, Schedule};
use crate::capability::config::{Setting, Settings, SECRET};
use crate::config::TaskSettings;
use crate::db::Sql;
use crate::plugin::Plugin;
use crate::task::{default_horizon, format_duration, CatchUp, TaskSpec};

const REGISTER_SCHEDULE: &str = include_str!("register_schedule.sql");
const STORED_SCHEDULE: &str = include_str!("stored_schedule.sql");
const APPLY_SCHEDULE: &str = include_str!("apply_schedule.sql");
const RECORD_CHANGE: &str = include_str!("record_change.sql");
const CHANGES_SINCE: &str = include_str!("changes_since.sql");
const LAST_CHANGE: &str = include_str!("last_change.sql");
const REGISTERED_CURSOR: &str = include_str!("registered_cursor.sql");
const LAST_PERIOD: &str = include_str!("last_period.sql");
const FORGOTTEN_PERIOD: &str = include_str!("forgotten_period.sql");
const ADOPT_SETTINGS: &str = include_str!("adopt_settings.sql");
const ADD_SETTINGS: &str = include_str!("add_settings.sql");
const REVISIONS: &str = include_str!("revisions.sql");
const AFTER_PERIODS: &str = include_str!("after_periods.sql");

/// Slots of the new schedule walked at most to find where it takes over.
const MAX_WALK: usize = 1_000_000;

/// What is shared about a task: every host generates by the same schedule and runs its
/// jobs with the same settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// None: on demand.
    pub cron: Option<String>,
    pub zone: String,
    pub catch_up: String,
    pub horizon: String,
    /// What one job is for (crate::calendar::Period).
    pub period: String,
    /// The business calendars (name@version) and rule, if any (crate::calendar::source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub business: Option<String>,
    /// Every period should have jobs.
    pub expect_jobs: bool,
    /// The tasks whose jobs of a period come first (sorted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Values, and digests of secrets ([`crate::capability::config::Settings::shown`]).
    pub settings: BTreeMap<String, String>,
}

impl Record {
    /// What a loaded plugin, adjusted by this host's file, says the task is.
    pub fn declared(spec: &TaskSpec, settings: &TaskSettings) -> Record {
        let horizon = settings.horizon.unwrap_or_else(|| default_horizon(spec.catch_up));
        Record {
            cron: spec.schedule.as_ref().map(|s| s.cron().to_owned()),
            zone: spec.zone.name().to_owned(),
            catch_up: spec.catch_up.to_string(),
            horizon: format_duration(horizon),
            period: declared_period(spec, settings).to_string(),
            business: spec.schedule.as_ref().and_then(Schedule::business).map(Business::summary),
            expect_jobs: settings.expect_jobs.unwrap_or_else(|| crate::task::default_expect_jobs(spec)),
            after: settings.after.clone(),
            settings: settings.values.shown(&spec.name),
        }
    }

    /// The stored record; settings NULL (never recorded) read as empty.
    fn stored(row: &tokio_postgres::Row) -> Record {
        let horizon: f64 = row.get(3);
        let settings: serde_json::Value = row.get::<_, Option<serde_json::Value>>(7).unwrap_or_default();
        Record {
            cron: row.get(0),
            zone: row.get(1),
            catch_up: row.get(2),
            horizon: format_duration(Duration::from_secs_f64(horizon.max(0.0))),
            period: row.get(8),
            business: row.get::<_, Option<serde_json::Value>>(11).map(|b| source_of(b).map_or_else(|e| format!("(unreadable: {e})"), |s| s.summary())),
            expect_jobs: row.get(12),
            after: row.get(13),
            settings: serde_json::from_value(settings).unwrap_or_default(),
        }
    }

    /// The fields that differ, as `cron "a" -> "b"`; empty when they agree.
    pub fn diff(&self, to: &Record) -> Vec<String> {
        let cron = |r: &Record| r.cron.clone().unwrap_or_else(|| "(on demand)".into());
        let fields = [
            ("cron", cron(self), cron(to)),
            ("zone", self.zone.clone(), to.zone.clone()),
            ("catch_up", self.catch_up.clone(), to.catch_up.clone()),
            ("horizon", self.horizon.clone(), to.horizon.clone()),
            ("period", self.period.clone(), to.period.clone()),
            ("business", self.business.clone().unwrap_or_else(|| "(none)".into()), to.business.clone().unwrap_or_else(|| "(none)".into())),
            ("expect_jobs", self.expect_jobs.to_string(), to.expect_jobs.to_string()),
            ("after", format!("[{}]", self.after.join(", ")), format!("[{}]", to.after.join(", "))),
        ];
        let mut diff: Vec<String> = fields.iter().filter(|(_, a, b)| a != b).map(|(name, a, b)| format!("{name} {a:?} -> {b:?}")).collect();
        let names: std::collections::BTreeSet<&String> = self.settings.keys().chain(to.settings.keys()).collect();
        for name in names {
            let (a, b) = (self.settings.get(name), to.settings.get(name));
            if a != b {
                let show = |v: Option<&String>| v.map_or("(none)".to_owned(), |v| format!("{v:?}"));
                diff.push(format!("setting {name} {} -> {}", show(a), show(b)));
            }
        }
        diff
    }

    fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a record is plain strings")
    }
}

/// The cursor a new schedule starts from for `start_at`: just before it, so that a slot
/// at `start_at` itself is the first one generated (as `backfill --from` includes its
/// start): `start_at = "2026-12-01"` runs a daily task's 1 December.
fn start_cursor(start_at: DateTime<Utc>) -> DateTime<Utc> {
    start_at - chrono::Duration::microseconds(1)
}

/// The day a task's calendars should reach: its horizon (at least 30 days) from today.
pub fn calendar_horizon(horizon: Duration) -> chrono::NaiveDate {
    let ahead = chrono::Duration::from_std(horizon.max(Duration::from_secs(30 * 86_400))).unwrap_or(chrono::Duration::days(30));
    (Utc::now() + ahead).date_naive()
}

/// What `spec`'s business calendar is made from, to store.
fn declared_source(spec: &TaskSpec) -> Option<serde_json::Value> {
    let source = spec.schedule.as_ref()?.business_source()?;
    Some(serde_json::to_value(source).expect("strings and numbers"))
}

/// The period unit a task is declared with: the file's, else its schedule's default.
fn declared_period(spec: &TaskSpec, settings: &TaskSettings) -> Period {
    settings.period.or(spec.schedule.as_ref().map(Schedule::default_period)).unwrap_or(Period::Slot)
}

/// Why a host does not serve a task: its file (or plugin) disagrees with the schedule
/// every other host runs by.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Disagreement {
    pub task: String,
    pub message: String,
    /// The stored schedule's revision it disagrees with.
    pub revision: i64,
}

/// The revisions of `tasks`' stored schedules (a task without one is missing).
pub async fn revisions(client: &impl Sql, tasks: &[String]) -> Result<std::collections::HashMap<String, i64>, tokio_postgres::Error> {
    Ok(client.rows(REVISIONS, &[&tasks]).await?.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Who is making a change: the command, the machine, the process.
pub fn origin(command: &str) -> String {
    format!("almanac {command} on {} (pid {})", crate::db::hostname(), std::process::id())
}

/// A host starting: insert `spec`'s schedule if the task has none (recorded as
/// `register`; returns its cursor, for the caller to tell once it commits); else check
/// that it is the stored one. Runs in the caller's transaction.
pub async fn register(client: &impl Sql, spec: &TaskSpec, settings: &TaskSettings, source: &str) -> Result<Option<DateTime<Utc>>, RegisterError> {
    let declared = Record::declared(spec, settings);
    let horizon = settings.horizon.unwrap_or_else(|| default_horizon(spec.catch_up));
    if let Some(warning) = spec.schedule.as_ref().and_then(|s| s.business()).and_then(|b| b.expiring(calendar_horizon(horizon))) {
        tracing::warn!(task = %spec.name, "calendar ending: {warning}");
    }
    // A forgotten task's ledger stays (it stops a backfill from repeating its periods):
    // registered again with another period unit, none of them would be recognised.
    if let Some(row) = client.opt(FORGOTTEN_PERIOD, &[&spec.name]).await? {
        let label: String = row.get(0);
        let unit = Period::of_label(&label);
        if unit.is_some_and(|u| u.as_str() != declared.period) {
            let unit = unit.map_or("?", Period::as_str);
            return Err(RegisterError::Disagrees(Disagreement {
                task: spec.name.clone(),
                revision: 0,
                message: format!(
                    "task {:?} is not registered here: it was forgotten with periods of a {unit} (the latest {label:?}), and {source} says period {}; \
                     registered so, its periods already done would not be recognised. Declare period = \"{unit}\" for it",
                    spec.name, declared.period
                ),
            }));
        }
    }
    let inserted = client
        .opt(
            REGISTER_SCHEDULE,
            &[
                &spec.name,
                &declared.cron,
                &declared.zone,
                &declared.catch_up,
                &settings.start_at.map(start_cursor),
                &settings.paused,
                &horizon.as_secs_f64(),
                &spec.schedule.as_ref().map(|s| s.published_json(Utc::now())),
                &serde_json::json!(declared.settings),
                &declared.period,
                &declared_source(spec),
                &declared.expect_jobs,
                &declared.after,
            ],
        )
        .await?;
    if let Some(row) = inserted {
        let (revision, cursor): (i64, DateTime<Utc>) = (row.get(0), row.get(1));
        let mut after = declared.json();
        after["cursor"] = serde_json::json!(cursor);
        after["paused"] = serde_json::json!(settings.paused.unwrap_or(false));
        let none: Option<serde_json::Value> = None;
        client.exec(RECORD_CHANGE, &[&spec.name, &revision, &"register", &none, &after, &origin("run"), &Some(source)]).await?;
        return Ok(Some(cursor));
    }
    let mut row = client.one(STORED_SCHEDULE, &[&spec.name]).await?;
    if row.get::<_, Option<serde_json::Value>>(7).is_none() {
        client.exec(ADOPT_SETTINGS, &[&spec.name, &serde_json::json!(declared.settings), &origin("run")]).await?;
        row = client.one(STORED_SCHEDULE, &[&spec.name]).await?;
    }
    let mut stored = Record::stored(&row);
    if let Some(added) = added_defaults(&stored, &declared, spec) {
        let names: Vec<String> = added.keys().cloned().collect();
        let why = format!("{source} adds setting(s) {} at their defaults", names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", "));
        client.exec(ADD_SETTINGS, &[&spec.name, &serde_json::json!(added), &origin("run"), &why, &names]).await?;
        tracing::info!(task = %spec.name, "settings added to the stored schedule: {why}");
        row = client.one(STORED_SCHEDULE, &[&spec.name]).await?;
        stored = Record::stored(&row);
    }
    let (cursor, paused): (DateTime<Utc>, bool) = (row.get(5), row.get(6));
    if stored != declared {
        let by = match client.opt(LAST_CHANGE, &[&spec.name]).await? {
            Some(r) => {
                let (action, role, origin, at): (String, String, String, DateTime<Utc>) = (r.get(0), r.get(1), r.get(2), r.get(3));
                format!(" ({action} by {role}, {origin}, at {})", at.format("%Y-%m-%d %H:%M:%SZ"))
            }
            None => String::new(),
        };
        return Err(RegisterError::Disagrees(Disagreement {
            task: spec.name.clone(),
            revision: row.get(4),
            // The difference first, in one line; then where each side comes from.
            message: format!(
                "task {:?} differs from the schedule every host runs by: {} (stored -> here). `almanac apply` with this file makes it the \
                 schedule of every host, and this host then loads it without a restart. Here: {source}; stored{by}: {}",
                spec.name,
                stored.diff(&declared).join(", "),
                show(&stored)
            ),
        }));
    }
    // The start_at that made this schedule is behind its cursor at every later start; only
    // one other than that is worth a word.
    let registered: Option<DateTime<Utc>> = match settings.start_at {
        Some(_) => client.opt(REGISTERED_CURSOR, &[&spec.name]).await?.and_then(|r| r.get(0)),
        None => None,
    };
    if let Some(start_at) = settings.start_at.filter(|s| start_cursor(*s) != cursor && Some(start_cursor(*s)) != registered) {
        tracing::warn!(
            task = %spec.name,
            "start_at {start_at} applies to a new schedule only; this one exists (cursor {cursor}): `almanac cursor {} --to ...` moves it",
            spec.name
        );
    }
    if let Some(wanted) = settings.paused.filter(|p| *p != paused) {
        tracing::warn!(
            task = %spec.name,
            "paused = {wanted} applies to a new schedule only; this one is {}: `almanac {} {}` changes it",
            if paused { "paused" } else { "running" },
            if wanted { "pause" } else { "resume" },
            spec.name
        );
    }
    Ok(None)
}

/// `apply`'s check of `after`: each task named is registered (a name no host has would
/// hold the task back for good), of the task's own period unit (periods are matched by
/// name: a daily task after a monthly one would wait forever), and does not come after
/// this task in turn.
async fn check_after(client: &impl Sql, task: &str, declared: &Record) -> Result<(), ApplyError> {
    if declared.after.is_empty() {
        return Ok(());
    }
    let rows = client.rows(AFTER_PERIODS, &[&declared.after]).await?;
    for name in &declared.after {
        let Some(row) = rows.iter().find(|r| r.get::<_, String>(0) == *name) else {
            return Err(ApplyError::Invalid(format!("{task:?} comes after {name:?}, which no host has registered: its jobs would wait for good")));
        };
        let (period, theirs): (String, Vec<String>) = (row.get(1), row.get(2));
        if period != declared.period {
            return Err(ApplyError::Invalid(format!(
                "{task:?} comes after {name:?}, whose periods are a {period}'s while its own are a {}'s: a task waits only for a task of its own period unit",
                declared.period
            )));
        }
        if theirs.iter().any(|t| t == task) {
            return Err(ApplyError::Invalid(format!("{task:?} comes after {name:?}, which comes after {task:?}: neither would ever run")));
        }
    }
    Ok(())
}

/// The settings `declared` has and `stored` lacks, when that is the whole difference and
/// each is at the default the plugin declares: a new version's new settings, which every
/// host running it holds alike and so are taken without `almanac apply`.
fn added_defaults(stored: &Record, declared: &Record, spec: &TaskSpec) -> Option<BTreeMap<String, String>> {
    let added: BTreeMap<String, String> =
        declared.settings.iter().filter(|(k, _)| !stored.settings.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let at_default = |(name, value): (&String, &String)| spec.settings.iter().any(|d| d.name == *name && d.default.as_ref() == Some(value));
    if added.is_empty() || !added.iter().all(at_default) {
        return None;
    }
    let mut with = stored.clone();
    with.settings.extend(added.clone());
    (with == *declared).then_some(added)
}

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error(transparent)]
    Disagrees(#[from] Disagreement),
}

fn show(r: &Record) -> String {
    let schedule = match &r.cron {
        Some(cron) => format!("cron {cron:?} in {}, catch_up {}", r.zone, r.catch_up),
        None => format!("on demand in {}", r.zone),
    };
    let settings: Vec<String> = r.settings.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
    let settings = if settings.is_empty() { String::new() } else { format!(", settings {}", settings.join(", ")) };
    format!("{schedule}, period {}, horizon {}{settings}", r.period, r.horizon)
}

/// What `almanac apply` did to one task's schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Registered {
        cursor: DateTime<Utc>,
    },
    Unchanged,
    Changed {
        changes: Vec<String>,
        /// The cursor moved so the new schedule takes over where the last slot handled
        /// under the old one ends: (from, to, that end).
        cursor: Option<(DateTime<Utc>, DateTime<Utc>, DateTime<Utc>)>,
        /// The periods from a month before the cursor to a year after it whose slot the
        /// change moves, adds or removes, one line each.
        moved: Vec<String>,
    },
}

/// `almanac apply`: make `spec`'s schedule (as this file adjusts it) the one every host
/// runs by, recorded. A changed calendar takes over where the last slot handled under
/// the old one ends, so no period is generated twice under two calendars.
pub async fn apply(
    tx: &tokio_postgres::Transaction<'_>,
    spec: &TaskSpec,
    settings: &TaskSettings,
    origin: &str,
    reason: Option<&str>,
    period_from: Option<chrono::NaiveDate>,
) -> Result<Applied, ApplyError> {
    let declared = Record::declared(spec, settings);
    check_after(tx, &spec.name, &declared).await?;
    let Some(row) = tx.opt(&format!("{STORED_SCHEDULE} FOR UPDATE"), &[&spec.name]).await? else {
        register(tx, spec, settings, reason.unwrap_or("almanac apply")).await.map_err(|e| match e {
            RegisterError::Db(e) => ApplyError::Db(e),
            RegisterError::Disagrees(d) => ApplyError::Invalid(d.message),
        })?;
        let cursor: DateTime<Utc> = tx.one(STORED_SCHEDULE, &[&spec.name]).await?.get(5);
        return Ok(Applied::Registered { cursor });
    };
    let stored = Record::stored(&row);
    if stored == declared {
        return Ok(Applied::Unchanged);
    }
    let cursor: DateTime<Utc> = row.get(5);
    let (stored_from, stored_before): (Option<chrono::NaiveDate>, Option<String>) = (row.get(9), row.get(10));
    let last_keyed: Option<DateTime<Utc>> = tx.one(LAST_PERIOD, &[&spec.name]).await?.get(0);
    let last = last_keyed.map_or(cursor, |keyed| keyed.max(cursor));
    let (period_from, period_before) = match unit_change(spec, &stored, &declared, last, period_from)? {
        Some((from, old)) => (Some(from), Some(old.to_string())),
        None => (stored_from, stored_before),
    };
    let mut moved = None;
    let mut periods = Vec::new();
    let calendars = (stored.cron.as_deref(), spec.schedule.as_ref());
    let moves = (&stored.cron, &stored.zone, &stored.business) != (&declared.cron, &declared.zone, &declared.business);
    if let ((Some(old), Some(new)), true) = (calendars, moves) {
        let old =
            stored_schedule(Some(old), &stored.zone, row.get(11)).map_err(|e| ApplyError::Invalid(format!("the stored schedule of {:?}: {e}", spec.name)))?;
        let old = old.expect("a cron");
        let unit: Period = declared.period.parse().map_err(ApplyError::Invalid)?;
        periods = moved_periods(&old, new, unit, cursor);
        let handled = super::operate::is_keyed(tx, &spec.name, cursor).await?;
        if let Some(end) = handled.then(|| old.next_after(cursor)).flatten().map(|s| s.start) {
            let mut walk = new.slots_after(cursor).take_while(|s| s.start < end).take(MAX_WALK + 1);
            let last = walk.by_ref().take(MAX_WALK).last().map(|s| s.start);
            if walk.next().is_some() {
                return Err(ApplyError::Invalid(format!(
                    "{:?}: more than {MAX_WALK} slots of the new schedule fall inside the last slot of the old one; move the cursor first (`almanac cursor`)",
                    spec.name
                )));
            }
            if let Some(to) = last {
                moved = Some((cursor, to, end));
            }
        }
    }
    let new_cursor = moved.map_or(cursor, |(_, to, _)| to);
    let horizon = settings.horizon.unwrap_or_else(|| default_horizon(spec.catch_up));
    let revision: i64 = tx
        .one(
            APPLY_SCHEDULE,
            &[
                &spec.name,
                &declared.cron,
                &declared.zone,
                &declared.catch_up,
                &horizon.as_secs_f64(),
                &new_cursor,
                &spec.schedule.as_ref().map(|s| s.published_json(Utc::now())),
                &serde_json::json!(declared.settings),
                &declared.period,
                &period_from,
                &period_before,
                &declared_source(spec),
                &declared.expect_jobs,
                &declared.after,
            ],
        )
        .await?
        .get(0);
    let (mut before, mut after) = (stored.json(), declared.json());
    if new_cursor != cursor {
        before["cursor"] = serde_json::json!(cursor);
        after["cursor"] = serde_json::json!(new_cursor);
    }
    if period_from != stored_from {
        after["period_from"] = serde_json::json!(period_from);
        after["period_before"] = serde_json::json!(period_before);
    }
    tx.exec(RECORD_CHANGE, &[&spec.name, &revision, &"apply", &Some(before), &Some(after), &origin, &reason]).await?;
    Ok(Applied::Changed { changes: stored.diff(&declared), cursor: moved, moved: periods })
}

/// The periods whose slot differs between `old` and `new`, from 31 days before `cursor`
/// to 366 days after it (the first 20): what a calendar change does, listed by
/// `apply` (a period generated already stays done under its old instant).
fn moved_periods(old: &Schedule, new: &Schedule, unit: Period, cursor: DateTime<Utc>) -> Vec<String> {
    let (from, to) = (cursor - chrono::Duration::days(31), cursor + chrono::Duration::days(366));
    let starts = |s: &Schedule| -> BTreeMap<String, DateTime<Utc>> {
        let mut periods = BTreeMap::new();
        for slot in s.slots_after(from).take_while(|x| x.start < to).take(MAX_WALK) {
            periods.entry(s.period_label(unit, slot.start)).or_insert(slot.start);
        }
        periods
    };
    let (before, after) = (starts(old), starts(new));
    let local = |t: &DateTime<Utc>| t.with_timezone(&new.zone()).format("%Y-%m-%d %H:%M %:z").to_string();
    let names: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut lines = Vec::new();
    for name in names {
        let line = match (before.get(name), after.get(name)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => format!("{name}: {} -> {}", local(a), local(b)),
            (Some(a), None) => format!("{name}: {} -> no slot", local(a)),
            (None, Some(b)) => format!("{name}: no slot -> {}", local(b)),
            (None, None) => continue,
        };
        let done = before.get(name).is_some_and(|a| *a <= cursor);
        lines.push(if done { format!("{line} (generated already: stays done at its old instant)") } else { line });
    }
    if lines.len() > 20 {
        let more = lines.len() - 20;
        lines.truncate(20);
        lines.push(format!("... and {more} more"));
    }
    lines
}

/// A change of period unit is a new identity space (a day's jobs are not a month's), so
/// `apply` makes it only when told from which local day the new unit starts: the first
/// day of one of its periods, and not before the end of the old unit's period holding
/// `last` (the latest instant generated or enqueued into), so no period of one unit
/// overlaps one of the other. Instants before that day keep the old unit's periods.
/// Returns that day and the old unit when the unit changes.
fn unit_change(
    spec: &TaskSpec,
    stored: &Record,
    declared: &Record,
    last: DateTime<Utc>,
    from: Option<chrono::NaiveDate>,
) -> Result<Option<(chrono::NaiveDate, Period)>, ApplyError> {
    if stored.period == declared.period {
        return match from {
            Some(_) => {
                Err(ApplyError::Invalid(format!("{:?}: --period-from is for a change of period unit, and the period stays {}", spec.name, stored.period)))
            }
            None => Ok(None),
        };
    }
    let (old, new): (Period, Period) = (stored.period.parse().map_err(ApplyError::Invalid)?, declared.period.parse().map_err(ApplyError::Invalid)?);
    let Some(from) = from else {
        return Err(ApplyError::Invalid(format!(
            "{:?}: the period changes from {old} to {new}, which gives every job a new identity (a {new} is not a {old}); \
             say from which local day the new unit starts with --period-from YYYY-MM-DD (the first day of a {new}, after the periods already generated)",
            spec.name
        )));
    };
    if !new.starts_on(from) {
        return Err(ApplyError::Invalid(format!("{:?}: --period-from {from} is not the first day of a {new}", spec.name)));
    }
    let zone: chrono_tz::Tz = stored.zone.parse().map_err(|_| ApplyError::Invalid(format!("unknown zone {:?}", stored.zone)))?;
    let day = last.with_timezone(&zone).date_naive();
    let earliest = old.next_start(day);
    if from < earliest {
        return Err(ApplyError::Invalid(format!(
            "{:?}: --period-from {from} is inside or before the {old} holding {day}, the last generated or enqueued into; \
             the new unit may start on {earliest} at the earliest (the first day of a {new} from then on)",
            spec.name
        )));
    }
    Ok(Some((from, old)))
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error("{0}")]
    Invalid(String),
}

/// Bring a served task in line with what a tick read of its stored record (`row`, as
/// lock_schedule.sql lays it out), when its revision moved: log each change since the
/// one this host knew, follow the schedule, adopt plain settings and stop serving the
/// task while a secret differs (it cannot be adopted: the database holds only digests).
/// Returns the schedule to generate by.
pub async fn follow(client: &impl Sql, plugin: &Plugin, row: &tokio_postgres::Row) -> Result<Arc<crate::task::Applied>, tokio_postgres::Error> {
    let task = plugin.name();
    let known = plugin.applied();
    let revision: i64 = row.get(3);
    if revision == known.revision {
        return Ok(known);
    }
    let (cron, zone, catch_up): (Option<String>, String, String) = (row.get(4), row.get(5), row.get(6));
    let parsed = stored_schedule(cron.as_deref(), &zone, row.get(12));
    let parsed = parsed.and_then(|s| zone.parse::<chrono_tz::Tz>().map_err(|e| e.to_string()).map(|z| (s, z)));
    let parsed = parsed.and_then(|(s, z)| catch_up.parse::<CatchUp>().map(|c| (s, z, c)));
    let period: Result<Period, String> = row.get::<_, String>(9).parse();
    let parsed = parsed.and_then(|(s, z, c)| period.map(|p| (s, z, c, p)));
    let (schedule, zone, catch_up, period) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::error!(%task, revision, "the stored schedule cannot be read here ({e}); keeping the one this host knew");
            return Ok(known);
        }
    };
    // Revision 0: the schedule as loaded, before any tick; its changes are not news.
    if known.revision != 0 {
        for change in client.rows(CHANGES_SINCE, &[&task, &known.revision]).await? {
            let (action, before, after): (String, Option<serde_json::Value>, Option<serde_json::Value>) = (change.get(0), change.get(1), change.get(2));
            let (role, origin, reason, at): (String, String, Option<String>, DateTime<Utc>) = (change.get(3), change.get(4), change.get(5), change.get(6));
            tracing::info!(
                %task, %action, by = %role, %origin, reason = reason.as_deref().unwrap_or("-"), at = %at,
                before = %before.unwrap_or_default(), after = %after.unwrap_or_default(),
                "schedule changed; this host follows it"
            );
        }
    }
    follow_settings(plugin, row.get(8));
    let period_from = row.get(10);
    let period_before = row.get::<_, Option<String>>(11).and_then(|p| p.parse().ok());
    let expect_jobs = row.get(13);
    plugin.follow(crate::task::Applied { revision, schedule, zone, catch_up, period, period_from, period_before, expect_jobs });
    Ok(plugin.applied())
}

/// Adopt the stored settings: plain values as they are; a secret this host holds
/// differently (or lacks) suspends the task here until the two agree.
fn follow_settings(plugin: &Plugin, stored: Option<serde_json::Value>) {
    let task = plugin.name();
    // Never recorded yet (a database from before settings): this host's stand.
    let Some(stored) = stored else { return };
    let stored: BTreeMap<String, String> = serde_json::from_value(stored).unwrap_or_default();
    let current = plugin.settings();
    let mine = current.shown(task);
    if stored == mine {
        plugin.resume();
        return;
    }
    if let Some(missing) = mine.keys().find(|name| !stored.contains_key(*name)) {
        plugin.suspend(format!(
            "the applied settings lack {missing:?}, which this host's plugin declares (another version applied them); \
             this host stops serving the task until they agree"
        ));
        return;
    }
    let mut values = BTreeMap::new();
    for (name, value) in &stored {
        match (value.starts_with(SECRET), mine.get(name)) {
            (false, _) => {
                values.insert(name.clone(), Setting { value: value.clone(), secret: false });
            }
            (true, Some(own)) if own == value => {
                values.insert(name.clone(), current.get(name).cloned().expect("a shown setting exists"));
            }
            (true, _) => {
                plugin.suspend(format!(
                    "its setting {name:?} is a secret applied with another value than this host's environment gives; \
                     this host stops serving the task until they agree (restart it with the secret `almanac apply` used)"
                ));
                return;
            }
        }
    }
    let changed: Vec<String> = stored.iter().filter(|(k, v)| mine.get(*k) != Some(v)).map(|(k, v)| format!("{k} = {v:?}")).collect();
    tracing::info!(%task, settings = %changed.join(", "), "settings applied elsewhere; this host uses them from now on");
    plugin.set_settings(Settings::new(values));
    plugin.resume();
}
