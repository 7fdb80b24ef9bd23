//! Cursor -> jobs. For each task, a tick locks the schedule row, walks the slots after
//! the cursor that are due, asks the plugin's `plan` for each slot's keys page by page,
//! inserts the jobs and advances the cursor, all in one transaction per bounded batch
//! of slots. A crash between batches resumes from the last committed slot; a second
//! scheduler finds the row locked and skips it.
//!
//! `plan` runs in a session of the plugin's own login ([`crate::login`]), in a
//! read-only repeatable-read transaction of its own beside the host's: it only reads
//! which keys belong to a slot, and every page of a batch sees one snapshot.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::{Conn, Pool};
use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::calendar::{Schedule, Slot};
use crate::db::Sql;
use crate::job::MAX_KEY_BYTES;
use crate::login::Logins;
use crate::plugin::{CallError, Loaded, Plugin};
use crate::task::Applied;
use crate::wake::Woken;

pub mod applied;
pub mod operate;
pub mod range;

const LOCK_SCHEDULE: &str = include_str!("lock_schedule.sql");
const INSERT_JOBS: &str = include_str!("insert_jobs.sql");
const ENQUEUE: &str = include_str!("enqueue.sql");
const RECORD_GENERATED: &str = include_str!("record_generated.sql");
const RECORD_SKIPPED: &str = include_str!("record_skipped.sql");
const ADVANCE_CURSOR: &str = include_str!("advance_cursor.sql");
const PUBLISH_CALENDAR: &str = include_str!("publish_calendar.sql");
const READ_APPLIED: &str = include_str!("read_applied.sql");
const PERIOD: &str = include_str!("period.sql");
const ADD_JOBS: &str = include_str!("add_jobs.sql");
const MARK_EMPTY: &str = include_str!("mark_empty.sql");
const SCHEDULE_EXISTS: &str = include_str!("schedule_exists.sql");
const RECORD_BACKFILL: &str = include_str!("record_backfill.sql");

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often each schedule is checked for due slots. Defaults to 1 s.
    pub tick: Duration,
    /// Keys asked of `plan` per call. Defaults to 5,000: a slot of 1,000,000 keys took
    /// 7.6 s at 5,000 per page against 8.2-11.2 s at 1,000 (`almanac bench`).
    pub plan_page: u32,
    /// Slots per transaction at most. Defaults to 64.
    pub max_slots_per_tick: usize,
    /// Jobs per transaction, after which the batch ends at the current slot's end.
    /// Defaults to 50,000.
    pub max_jobs_per_tick: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options { tick: Duration::from_secs(1), plan_page: 5000, max_slots_per_tick: 64, max_jobs_per_tick: 50_000 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("database error: {0}")]
    Db(#[from] tokio_postgres::Error),
    #[error(transparent)]
    Login(#[from] crate::login::LoginError),
    #[error("plan of {task} for slot {slot} failed: {error}")]
    Plan {
        task: String,
        slot: String,
        error: CallError,
        /// The call sent a cancel request on the connection: replace it.
        cancel_sent: bool,
    },
    #[error("plan of {task} for slot {slot} returned {problem}")]
    BadPlan { task: String, slot: String, problem: String },
}

/// What one tick did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickOutcome {
    pub generated: usize,
    /// Periods generated whose plan returned no keys (recorded `empty`).
    pub empty: usize,
    pub skipped: usize,
    /// Periods passed over because the ledger holds them already (generated, or skipped
    /// by the catch-up policy), with the revision they were handled under.
    pub handled: Vec<(String, Option<i64>)>,
    pub jobs: u64,
    /// Keys `plan` returned; more than `jobs` when some jobs already existed.
    pub planned: u64,
    /// The batch bound stopped the tick early: tick again now.
    pub more: bool,
    /// From the database's now to the start of the next slot after the cursor (None:
    /// nothing to generate until the schedule changes: paused, on demand, suspended).
    pub next: Option<chrono::Duration>,
}

impl TickOutcome {
    /// A period the ledger holds already, listed once however many of its slots came by
    /// (a daily task's month has thirty).
    fn passed_over(&mut self, period: String, revision: Option<i64>) {
        if self.handled.last().is_none_or(|(last, _)| *last != period) {
            self.handled.push((period, revision));
        }
    }
}

/// One job by identity, as `almanac.enqueue` takes it.
#[derive(Debug, Clone, Copy)]
pub struct NewJob<'a> {
    pub task: &'a str,
    /// An instant of the business period the job belongs to.
    pub slot: DateTime<Utc>,
    pub key: &'a str,
    pub payload: Option<&'a serde_json::Value>,
    /// Not before then (None: its slot).
    pub run_after: Option<DateTime<Utc>>,
}

/// Insert one job by identity, as `almanac.enqueue` does (its checks and all), recorded
/// as a change from `origin`; false when it already existed. A slot still to come is not
/// run before it starts. `checked`: the caller checked the slot against the calendar.
pub async fn enqueue(client: &impl Sql, job: &NewJob<'_>, checked: bool, origin: &str) -> Result<bool, tokio_postgres::Error> {
    let NewJob { task, slot, key, payload, run_after } = *job;
    Ok(client.one(ENQUEUE, &[&task, &slot, &key, &payload.cloned(), &checked, &run_after, &origin]).await?.get(0))
}

/// The plugin's session `plan` runs in, opened at its first call in a batch and ended
/// with the batch.
pub struct Planner<'a> {
    logins: &'a Logins,
    session: Option<Arc<Conn>>,
}

impl<'a> Planner<'a> {
    pub fn new(logins: &'a Logins) -> Planner<'a> {
        Planner { logins, session: None }
    }

    /// The session, in its read-only transaction.
    async fn session(&mut self, task: &str) -> Result<Arc<Conn>, SchedulerError> {
        if let Some(session) = &self.session {
            return Ok(session.clone());
        }
        let session = Arc::new(self.logins.get(task).await?);
        // Repeatable read: every `plan` page of the batch sees one snapshot of the
        // plugin's tables, so paging cannot skip or repeat a key that moves meanwhile.
        session.in_transaction(true);
        session.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?;
        self.session = Some(session.clone());
        Ok(session)
    }

    /// End the batch's planning transaction (it wrote nothing) and what it left behind.
    pub async fn end(&mut self) -> Result<(), SchedulerError> {
        if let Some(session) = self.session.take() {
            session.batch_execute(&format!("ROLLBACK; {}", crate::login::CLEAN)).await?;
            session.in_transaction(false);
        }
        Ok(())
    }

    /// After a failure: the session is not returned to its pool.
    fn discard(&mut self) {
        if let Some(session) = self.session.take() {
            crate::db::discard(session);
        }
    }
}

/// Generate the due slots of one task, up to the batch bound, in one transaction.
pub async fn tick(conn: &Arc<Conn>, logins: &Logins, plugin: &Plugin, options: &Options) -> Result<TickOutcome, SchedulerError> {
    let mut planner = Planner::new(logins);
    // Until it ends: dropped before (a panic), the connection is closed, not lent again.
    conn.in_transaction(true);
    conn.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ").await?;
    // The plan's session ends first; if that fails, so does the tick, rolled back below
    // (left open, the next tick on this connection ran inside it).
    let generated = match generate(conn, &mut planner, plugin, options).await {
        Ok(outcome) => planner.end().await.map(|()| outcome),
        Err(e) => {
            planner.discard();
            Err(e)
        }
    };
    let ended = match generated {
        Ok(outcome) => {
            conn.batch_execute("COMMIT").await?;
            Ok(outcome)
        }
        Err(SchedulerError::Db(e)) if e.code() == Some(&tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE) => {
            // Another scheduler moved the cursor after our snapshot: it did the work.
            conn.batch_execute("ROLLBACK").await?;
            Ok(TickOutcome::default())
        }
        Err(e) => {
            conn.batch_execute("ROLLBACK").await?;
            Err(e)
        }
    };
    conn.in_transaction(false);
    ended
}

async fn generate(conn: &Arc<Conn>, planner: &mut Planner<'_>, plugin: &Plugin, options: &Options) -> Result<TickOutcome, SchedulerError> {
    let spec = &plugin.spec;
    // An on-demand task has nothing to generate; its record is read for its settings.
    let read = if spec.schedule.is_some() { LOCK_SCHEDULE } else { READ_APPLIED };
    let Some(row) = conn.opt(read, &[&spec.name]).await? else {
        // Another scheduler is generating: look again at the next tick, in case that one
        // dies before it finishes. (No row at all, forgotten: a change brings it back.)
        let locked = conn.opt(SCHEDULE_EXISTS, &[&spec.name]).await?.is_some();
        return Ok(TickOutcome { next: locked.then(chrono::Duration::zero), ..TickOutcome::default() });
    };
    // Generate by the stored schedule, whatever this host's file says (applied::register
    // kept a host whose file disagrees from serving the task at all).
    let applied = applied::follow(&**conn, plugin, &row).await?;
    let Some(schedule) = applied.schedule.as_ref().filter(|_| !plugin.is_suspended()) else {
        return Ok(TickOutcome::default());
    };
    let (cursor, paused, now): (DateTime<Utc>, bool, DateTime<Utc>) = (row.get(0), row.get(1), row.get(2));
    let published_to: Option<chrono::NaiveDate> = row.get(7);
    if published_to.is_none_or(|to| to < now.date_naive() + chrono::Duration::days(crate::calendar::REFRESH_DAYS)) {
        conn.exec(PUBLISH_CALENDAR, &[&spec.name, &schedule.published_json(now)]).await?;
    }
    if paused {
        return Ok(TickOutcome::default());
    }
    let due = schedule.slots_after(cursor).take_while(|s| s.start <= now);
    let (mut outcome, last) = generate_slots(conn, planner, plugin, &applied, schedule, due, Some(now), options).await?;
    outcome.next = schedule.slots_after(last.unwrap_or(cursor)).next().map(|slot| slot.start - now);
    if let Some(last) = last {
        conn.exec(ADVANCE_CURSOR, &[&spec.name, &last]).await?;
        tracing::info!(task = %spec.name, generated = outcome.generated, skipped = outcome.skipped, jobs = outcome.jobs, through = %last, "slots generated");
    }
    Ok(outcome)
}

/// Generate (or, per the catch-up policy as of `policy_now`, skip) `slots` until the
/// batch bound; returns what was done and the start of the last slot handled.
#[allow(clippy::too_many_arguments)]
async fn generate_slots(
    conn: &Arc<Conn>,
    planner: &mut Planner<'_>,
    plugin: &Plugin,
    applied: &Applied,
    schedule: &Schedule,
    slots: impl Iterator<Item = Slot>,
    policy_now: Option<DateTime<Utc>>,
    options: &Options,
) -> Result<(TickOutcome, Option<DateTime<Utc>>), SchedulerError> {
    let spec = &plugin.spec;
    let mut outcome = TickOutcome::default();
    let mut last = None;
    for (n, slot) in slots.enumerate() {
        if n == options.max_slots_per_tick || outcome.jobs >= options.max_jobs_per_tick {
            outcome.more = true;
            break;
        }
        let label = applied.period_label(slot.start);
        let (anchor, status, revision, period) = match conn.opt(PERIOD, &[&spec.name, &label, &slot.start]).await? {
            Some(row) => (row.get(0), row.get::<_, Option<String>>(1), row.get(2), row.get(3)),
            None => (slot.start, None, None, label),
        };
        let backfill = policy_now.is_none();
        match status.as_deref() {
            // One effect per period: a slot of a period already generated (under this
            // calendar or an older one) adds nothing. A period the policy skipped gets
            // the policy's word again for this slot (a week skipped on Monday may be due
            // on Wednesday); a backfill generates it.
            // An empty period likewise; a backfill asks its plan again.
            Some("generated") => outcome.passed_over(period, revision),
            Some("empty") if !backfill => outcome.passed_over(period, revision),
            _ => match policy_now.and_then(|now| applied.catch_up.skips(schedule, &slot, now)) {
                None => {
                    let reason = backfill.then_some("backfill");
                    conn.exec(RECORD_GENERATED, &[&spec.name, &anchor, &reason, &0i64, &period, &applied.revision]).await?;
                    let (planned, jobs) = plan_slot(conn, planner, plugin, applied, &slot, anchor, &period, options).await?;
                    conn.exec(ADD_JOBS, &[&spec.name, &period, &(jobs as i64)]).await?;
                    if planned == 0 {
                        conn.exec(MARK_EMPTY, &[&spec.name, &period]).await?;
                        outcome.empty += 1;
                        if applied.expect_jobs {
                            tracing::warn!(task = %spec.name, %period, "the period's plan returned no keys: no job is for it (the task expects jobs; `almanac status` reports it)");
                        }
                    }
                    outcome.generated += 1;
                    outcome.jobs += jobs;
                    outcome.planned += planned;
                }
                Some(reason) => {
                    conn.exec(RECORD_SKIPPED, &[&spec.name, &anchor, &reason, &period, &applied.revision]).await?;
                    outcome.skipped += 1;
                }
            },
        }
        last = Some(slot.start);
    }
    Ok((outcome, last))
}

#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    #[error(transparent)]
    Range(#[from] range::RangeError),
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

/// Backfill `plugin`'s task over `[from, to)` by the stored schedule, once
/// [`range::check_backfill`] allows it, and record it (`almanac.changes`, action `backfill`) with
/// `origin` and `reason`. `progress` sees each committed batch.
#[allow(clippy::too_many_arguments)]
pub async fn backfill_recorded(
    conn: &Arc<Conn>,
    logins: &Logins,
    plugin: &Plugin,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    options: &Options,
    origin: &str,
    reason: Option<&str>,
    progress: impl FnMut(&TickOutcome, DateTime<Utc>),
) -> Result<TickOutcome, BackfillError> {
    let task = &plugin.spec.name;
    let Some(schedule) = &plugin.spec.schedule else { return Err(range::RangeError::OnDemand { task: task.clone() }.into()) };
    range::check_backfill(conn, task, schedule, from, to).await?;
    let done = backfill(conn, logins, plugin, from, to, options, progress).await?;
    let after = serde_json::json!({
        "from": from, "to": to, "generated": done.generated, "empty": done.empty, "skipped": done.skipped,
        "jobs": done.jobs, "passed_over": done.handled.len(),
    });
    conn.exec(RECORD_BACKFILL, &[task, &after, &origin, &reason]).await?;
    Ok(done)
}

/// Generate every slot starting in `[from, to)` regardless of cursor and catch-up
/// policy, one transaction per batch; `progress` sees each committed batch. Running it
/// twice adds nothing.
pub async fn backfill(
    conn: &Arc<Conn>,
    logins: &Logins,
    plugin: &Plugin,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    options: &Options,
    mut progress: impl FnMut(&TickOutcome, DateTime<Utc>),
) -> Result<TickOutcome, SchedulerError> {
    let mut total = TickOutcome::default();
    // The first slot starting at or after `from`.
    let mut after = from - chrono::Duration::microseconds(1);
    // By the stored record (period unit and where it starts included), as the hosts.
    let applied = match conn.opt(READ_APPLIED, &[&plugin.spec.name]).await? {
        Some(row) => applied::follow(&**conn, plugin, &row).await?,
        None => plugin.applied(),
    };
    let Some(schedule) = &applied.schedule else {
        return Ok(total);
    };
    // The months of the range exist before the jobs go in, so they do not gather in the
    // default partition.
    crate::history::ensure(conn, from, to).await?;
    loop {
        let slots = schedule.slots_after(after).take_while(|s| s.start < to);
        conn.in_transaction(true);
        conn.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ").await?;
        let mut planner = Planner::new(logins);
        let generated = match generate_slots(conn, &mut planner, plugin, &applied, schedule, slots, None, options).await {
            Ok(batch) => planner.end().await.map(|()| batch),
            Err(e) => {
                planner.discard();
                Err(e)
            }
        };
        let batch = match generated {
            Ok(batch) => batch,
            Err(e) => {
                conn.batch_execute("ROLLBACK").await?;
                conn.in_transaction(false);
                return Err(e);
            }
        };
        conn.batch_execute("COMMIT").await?;
        conn.in_transaction(false);
        let (outcome, last) = batch;
        total.generated += outcome.generated;
        total.empty += outcome.empty;
        total.jobs += outcome.jobs;
        total.planned += outcome.planned;
        total.skipped += outcome.skipped;
        total.handled.extend(outcome.handled.iter().cloned());
        let Some(last) = last else { break };
        progress(&total, last);
        if !outcome.more {
            break;
        }
        after = last;
    }
    Ok(total)
}

/// Ask `plan` for the slot's keys page by page and insert them as jobs of `period`,
/// keyed under `anchor`; returns (keys planned, jobs inserted).
#[allow(clippy::too_many_arguments)]
async fn plan_slot(
    conn: &Arc<Conn>,
    planner: &mut Planner<'_>,
    plugin: &Plugin,
    schedule: &Applied,
    slot: &Slot,
    anchor: DateTime<Utc>,
    period: &str,
    options: &Options,
) -> Result<(u64, u64), SchedulerError> {
    let spec = &plugin.spec;
    let wit_slot = &schedule.wit_slot(slot, period);
    let bad = |problem: String| SchedulerError::BadPlan { task: spec.name.clone(), slot: slot.label.clone(), problem };
    let insert = crate::db::Prepared::on(conn, INSERT_JOBS).await?;
    let session = planner.session(&spec.name).await?;
    let mut after: Option<String> = None;
    let (mut planned, mut inserted) = (0, 0);
    loop {
        let called = plugin.plan(&session, wit_slot, after.as_deref(), options.plan_page).await;
        let cancel_sent = called.ending.cancel_sent;
        let keys = called.result.map_err(|error| SchedulerError::Plan { task: spec.name.clone(), slot: slot.label.clone(), error, cancel_sent })?;
        let Some(last) = keys.last() else {
            break;
        };
        if keys.len() > options.plan_page as usize {
            return Err(bad(format!("{} keys for a page of {}", keys.len(), options.plan_page)));
        }
        if keys.iter().any(String::is_empty) {
            return Err(bad("an empty key".into()));
        }
        if let Some(long) = keys.iter().find(|k| k.len() > MAX_KEY_BYTES) {
            return Err(bad(format!("a key of {} bytes; the limit is {MAX_KEY_BYTES}", long.len())));
        }
        if after.as_deref() == Some(last.as_str()) {
            return Err(bad(format!("the page after {last:?} again (paging does not advance)")));
        }
        let n = insert.exec(conn, &[&spec.name, &anchor, &keys, &period]).await?;
        inserted += n;
        planned += keys.len() as u64;
        after = Some(last.clone());
    }
    Ok((planned, inserted))
}

/// Tick every task until `shutdown`, one bounded tick per task per round so a task with
/// a long backlog cannot starve the others. A task whose tick fails (its plan, or a
/// statement the server refused) is retried with its own backoff; only a lost
/// connection ends the round.
/// The scheduler's wait after a lost connection: doubling from the first to the most.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// With LISTEN on (`changes`), an idle scheduler looks at a task again at its next slot,
/// when a schedule changes, or after this long at the latest (a lost notification, the
/// published calendar's refresh).
const LONGEST_REST: Duration = Duration::from_secs(60);

pub async fn run(
    pool: Pool,
    logins: Arc<Logins>,
    loaded: Arc<Loaded>,
    options: Options,
    mut changes: Option<watch::Receiver<u64>>,
    shutdown: CancellationToken,
) {
    let mut backoff: HashMap<String, (Instant, Duration)> = HashMap::new();
    // When each task is looked at next (absent: now); kept only with `changes`.
    let mut next: HashMap<String, Instant> = HashMap::new();
    let mut upkeep = crate::history::Upkeep::default();
    // After a lost connection: a pooler answers a client's connect at once and fails its
    // first statement while the server is away (PgBouncer's server_login_retry), so an
    // immediate retry spun, logging a million lines in a minute.
    let mut pause = RETRY_FIRST;
    while !shutdown.is_cancelled() {
        let Ok(conn) = crate::db::connect(&pool, &shutdown).await else { return };
        // Before generating: the months the slots fall in exist (checked every 10 minutes).
        upkeep.run(&conn).await;
        logins.close_idle();
        let conn = Arc::new(conn);
        let (mut healthy, mut more) = (true, false);
        // The plugins as loaded now; a reload meanwhile is seen on the next round.
        let registry = loaded.load_full();
        // A plugin no longer served backs off no more: its deadline would keep the rest
        // between rounds at nothing.
        backoff.retain(|name, _| registry.get(name).is_some());
        for plugin in registry.iter() {
            let name = plugin.name().to_owned();
            if shutdown.is_cancelled() {
                return;
            }
            if backoff.get(&name).is_some_and(|(until, _)| Instant::now() < *until) || next.get(&name).is_some_and(|at| Instant::now() < *at) {
                continue;
            }
            // The next slot is as far from the tick's start as the database said.
            let started = Instant::now();
            match tick(&conn, &logins, plugin, &options).await {
                Ok(outcome) => {
                    backoff.remove(&name);
                    more |= outcome.more;
                    if changes.is_some() && !outcome.more {
                        let rest = outcome.next.and_then(|d| d.to_std().ok()).map_or(LONGEST_REST, |d| d.min(LONGEST_REST));
                        next.insert(name, started + rest);
                    }
                }
                Err(SchedulerError::Login(e)) if e.transient() => {
                    tracing::warn!(task = %name, "scheduler cannot open the task's session: {e}");
                    healthy = false;
                }
                Err(SchedulerError::Db(e)) if crate::db::is_transient(&e) => {
                    tracing::warn!(task = %name, "scheduler lost its database connection: {}", crate::db::error_chain(&e));
                    healthy = false;
                }
                Err(e) => {
                    let delay = backoff.get(&name).map_or(Duration::from_secs(1), |(_, d)| (*d * 2).min(Duration::from_secs(300)));
                    tracing::error!(task = %name, retry_in = ?delay, "{}", crate::text::clip(e.to_string(), crate::text::MAX_ERROR));
                    if let SchedulerError::Plan { error, cancel_sent, .. } = &e {
                        healthy = !cancel_sent && !matches!(error, CallError::ConnectionLost(_));
                    }
                    backoff.insert(name.clone(), (Instant::now() + delay, delay));
                }
            }
            if !healthy {
                break;
            }
        }
        if !healthy {
            crate::db::discard(conn);
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.cancelled() => {}
            }
            pause = (pause * 2).min(RETRY_MAX);
            continue;
        }
        pause = RETRY_FIRST;
        drop(conn);
        if more {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(options.tick) => {}
            _ = shutdown.cancelled() => {}
        }
        if let Some(changes) = &mut changes {
            rest(changes, &loaded, &registry, &mut next, &backoff, options.tick, &shutdown).await;
        }
    }
}

/// Until the first task is due (or backs off no longer), a schedule changes, or the
/// plugins are reloaded, suspended or resumed; watching only this host's clock and
/// registry meanwhile, so an idle scheduler sends the database nothing.
async fn rest(
    changes: &mut watch::Receiver<u64>,
    loaded: &Loaded,
    registry: &Arc<crate::plugin::Registry>,
    next: &mut HashMap<String, Instant>,
    backoff: &HashMap<String, (Instant, Duration)>,
    step: Duration,
    shutdown: &CancellationToken,
) {
    let served = crate::plugin::Served::of(registry.clone());
    let until = registry
        .iter()
        .map(|p| next.get(p.name()).copied().unwrap_or_else(Instant::now))
        .chain(backoff.values().map(|(until, _)| *until))
        .min()
        .unwrap_or_else(|| Instant::now() + LONGEST_REST);
    // A change seen before the next round looks: one arriving during it wakes the next.
    // The listener gone (shutting down), the scheduler ticks by the clock.
    match crate::wake::until(changes, until, step, || served.changed(loaded), shutdown).await {
        Woken::Notified | Woken::Changed => next.clear(),
        Woken::Closed | Woken::Time | Woken::Shutdown => {}
    }
}

#[cfg(test)]
mod tests {
    use super::TickOutcome;

    #[test]
    fn a_period_is_passed_over_once_whatever_its_slots() {
        let mut outcome = TickOutcome::default();
        for period in ["2026-03", "2026-03", "2026-03", "2026-04", "2026-04"] {
            outcome.passed_over(period.to_owned(), Some(1));
        }
        assert_eq!(outcome.handled, [("2026-03".to_owned(), Some(1)), ("2026-04".to_owned(), Some(1))]);
    }
}
