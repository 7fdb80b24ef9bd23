//! A task's month on the console's calendar: each day in the task's zone with its periods
//! as the calendar computes them and as the ledger (`almanac.slots`) and the jobs say they
//! went. A period the calendar has but the ledger lacks (between the task's first period
//! and its cursor) is `missing`, a period whose plan returned no keys is `empty`: neither
//! can be overlooked, as each colours its day.
use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use tokio_postgres::Client;

use crate::db::Sql;

const TASK: &str = include_str!("calendar_task.sql");
const DAYS: &str = include_str!("calendar_days.sql");

/// Slots enumerated per month at most (a minutely task has 44,640).
const MOST_SLOTS: usize = 50_000;

#[derive(Debug, Serialize)]
pub struct Month {
    pub task: String,
    pub zone: String,
    /// `YYYY-MM`, in the task's zone.
    pub month: String,
    pub held: bool,
    pub paused: bool,
    /// No schedule: the days show only what was enqueued.
    pub on_demand: bool,
    pub cursor: Option<DateTime<Utc>>,
    pub days: Vec<Day>,
}

/// One day of the month, in the task's zone.
#[derive(Debug, Default, Serialize)]
pub struct Day {
    pub day: String,
    /// 0 Monday … 6 Sunday.
    pub weekday: u32,
    /// The day's offset from UTC changes (a DST switch).
    pub dst: bool,
    /// Periods the calendar has this day, and of those still to come.
    pub expected: i64,
    pub to_come: i64,
    /// Past periods after the cursor: the scheduler has yet to generate them.
    pub due: i64,
    /// Periods the calendar has, past and within the ledger's span, that it lacks.
    pub missing: i64,
    pub generated: i64,
    pub empty: i64,
    pub skipped: i64,
    pub enqueued: i64,
    /// Why a period was skipped (the first reason, if several).
    pub reason: Option<String>,
    pub jobs: i64,
    pub done: i64,
    pub pending: i64,
    pub failed: i64,
    pub discarded: i64,
    /// What the day's cell says first: failed, missing, held, pending, done, partly,
    /// empty, skipped, to-come, due (past the cursor, not generated yet), before (the
    /// calendar's, before the task's first period) or none.
    pub state: &'static str,
    /// The day's bounds (UTC), for listing its jobs.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
pub enum CalendarError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error("a month is YYYY-MM, not {0:?}")]
    Month(String),
}

/// Local midnight of `date` in `zone` (the earliest instant of the day where midnight is
/// skipped or repeated).
fn midnight(zone: Tz, date: NaiveDate) -> DateTime<Utc> {
    let mut at = date.and_hms_opt(0, 0, 0).expect("midnight");
    loop {
        if let Some(t) = zone.from_local_datetime(&at).earliest() {
            return t.with_timezone(&Utc);
        }
        // Midnight does not exist that day (a DST switch at 00:00): the day starts later.
        at += Duration::minutes(30);
    }
}

fn state(d: &Day, held: bool) -> &'static str {
    match () {
        _ if d.failed > 0 => "failed",
        _ if d.missing > 0 => "missing",
        _ if d.pending > 0 && held => "held",
        _ if d.pending > 0 => "pending",
        // An empty period (its plan returned no keys) or one past due must not hide
        // behind the done ones of the same day.
        _ if d.empty > 0 => "empty",
        _ if d.due > 0 => "due",
        _ if d.jobs > 0 && d.done == d.jobs => "done",
        _ if d.jobs > 0 => "partly",
        _ if d.skipped > 0 => "skipped",
        _ if d.to_come > 0 => "to-come",
        _ if d.expected > 0 => "before",
        _ => "none",
    }
}

/// Task `task`'s `month` (`YYYY-MM`, the current one in its zone if None); None if the task
/// has no schedule row.
pub async fn month(client: &Client, task: &str, month: Option<&str>) -> Result<Option<Month>, CalendarError> {
    let Some(row) = client.opt(TASK, &[&task]).await? else { return Ok(None) };
    let zone_name: String = row.get(0);
    let zone: Tz = zone_name.parse().unwrap_or(Tz::UTC);
    let (cursor, held, paused, first): (Option<DateTime<Utc>>, bool, bool, Option<DateTime<Utc>>) = (row.get(1), row.get(2), row.get(3), row.get(4));
    let now = Utc::now();
    let first_day = match month {
        Some(m) => NaiveDate::parse_from_str(&format!("{m}-01"), "%Y-%m-%d").map_err(|_| CalendarError::Month(m.to_owned()))?,
        None => {
            let today = now.with_timezone(&zone).date_naive();
            NaiveDate::from_ymd_opt(today.year(), today.month(), 1).expect("a month's first day")
        }
    };
    let next_month = first_day.checked_add_months(chrono::Months::new(1)).ok_or_else(|| CalendarError::Month(first_day.to_string()))?;
    let (from, to) = (midnight(zone, first_day), midnight(zone, next_month));
    let zone_param = zone.name().to_owned();
    let rows = client.rows(DAYS, &[&task, &from, &to, &zone_param]).await?;

    let mut days: Vec<Day> = first_day
        .iter_days()
        .take_while(|d| *d < next_month)
        .map(|date| {
            let (start, end) = (midnight(zone, date), midnight(zone, date + Duration::days(1)));
            let offset = |t: DateTime<Utc>| t.with_timezone(&zone).format("%z").to_string();
            Day {
                day: date.to_string(),
                weekday: date.weekday().num_days_from_monday(),
                dst: offset(start) != offset(end - Duration::seconds(1)),
                from: start,
                to: end,
                ..Day::default()
            }
        })
        .collect();
    let index = |date: NaiveDate| usize::try_from((date - first_day).num_days()).ok();
    let schedule = crate::scheduler::operate::schedule_of(client, task).await?.and_then(|s| s.schedule().ok().flatten());
    let on_demand = schedule.is_none();
    let mut handled = vec![0i64; days.len()];
    if let Some(schedule) = &schedule {
        for slot in schedule.slots_after(from - Duration::microseconds(1)).take_while(|s| s.start < to).take(MOST_SLOTS) {
            let Some(day) = index(slot.start.with_timezone(&zone).date_naive()).and_then(|i| days.get_mut(i).map(|d| (i, d))) else { continue };
            let (i, day) = day;
            day.expected += 1;
            if slot.start > now {
                day.to_come += 1;
            } else if cursor.is_none_or(|c| slot.start > c) {
                day.due += 1;
            } else if first.is_some_and(|f| slot.start >= f) {
                handled[i] += 1;
            }
        }
    }
    for r in &rows {
        let Some(day) = r.get::<_, String>(0).parse::<NaiveDate>().ok().and_then(index).and_then(|i| days.get_mut(i)) else { continue };
        (day.generated, day.empty, day.skipped, day.enqueued, day.reason) = (r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
        (day.jobs, day.done, day.pending, day.failed, day.discarded) = (r.get(6), r.get(7), r.get(8), r.get(9), r.get(10));
    }
    for (day, handled) in days.iter_mut().zip(handled) {
        day.missing = (handled - (day.generated + day.empty + day.skipped + day.enqueued)).max(0);
        day.state = state(day, held);
    }
    Ok(Some(Month { task: task.to_owned(), zone: zone_name, month: first_day.format("%Y-%m").to_string(), held, paused, on_demand, cursor, days }))
}

/// One month of a task's year strip: its days' counts summed, and what it says first.
#[derive(Debug, Serialize)]
pub struct MonthSummary {
    /// `YYYY-MM`, in the task's zone.
    pub month: String,
    pub state: &'static str,
    pub jobs: i64,
    pub done: i64,
    pub pending: i64,
    pub failed: i64,
    pub missing: i64,
    pub empty: i64,
    pub skipped: i64,
}

/// The order a month weighs its days in: what needs someone first (a failure, a missing
/// or empty period, work waiting), then what is fine.
const MONTH_FIRST: [&str; 12] = ["failed", "missing", "held", "pending", "empty", "due", "partly", "done", "skipped", "to-come", "before", "none"];

/// Task `task`'s `year` (in its zone) month by month, each as [`month`] computes it; None
/// if the task has no schedule row.
pub async fn year(client: &Client, task: &str, year: i32) -> Result<Option<Vec<MonthSummary>>, CalendarError> {
    if !(1970..=9999).contains(&year) {
        return Err(CalendarError::Month(year.to_string()));
    }
    let mut months = Vec::with_capacity(12);
    for m in 1..=12 {
        let Some(month) = month(client, task, Some(&format!("{year:04}-{m:02}"))).await? else { return Ok(None) };
        let sum = |f: fn(&Day) -> i64| month.days.iter().map(f).sum::<i64>();
        months.push(MonthSummary {
            state: MONTH_FIRST.into_iter().find(|s| month.days.iter().any(|d| d.state == *s)).unwrap_or("none"),
            jobs: sum(|d| d.jobs),
            done: sum(|d| d.done),
            pending: sum(|d| d.pending),
            failed: sum(|d| d.failed),
            missing: sum(|d| d.missing),
            empty: sum(|d| d.empty),
            skipped: sum(|d| d.skipped),
            month: month.month,
        });
    }
    Ok(Some(months))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_says_its_worst_first() {
        let day = |f: fn(&mut Day)| {
            let mut d = Day::default();
            f(&mut d);
            state(&d, false)
        };
        assert_eq!(day(|d| (d.jobs, d.done, d.failed) = (3, 2, 1)), "failed");
        assert_eq!(day(|d| (d.expected, d.missing) = (1, 1)), "missing");
        assert_eq!(day(|d| (d.jobs, d.done) = (3, 3)), "done");
        assert_eq!(day(|d| (d.jobs, d.done, d.expected, d.empty) = (3, 3, 2, 1)), "empty", "an empty period is not hidden by a done one");
        assert_eq!(day(|d| (d.jobs, d.done, d.discarded) = (3, 2, 1)), "partly");
        assert_eq!(day(|d| (d.expected, d.generated, d.empty) = (1, 0, 1)), "empty");
        assert_eq!(day(|d| (d.expected, d.to_come) = (1, 1)), "to-come");
        assert_eq!(day(|_| ()), "none");
    }

    #[test]
    fn a_dst_day_is_marked_and_a_skipped_midnight_starts_later() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let switch = NaiveDate::from_ymd_opt(2026, 3, 29).unwrap();
        let (start, end) = (midnight(berlin, switch), midnight(berlin, switch + Duration::days(1)));
        assert_eq!(end - start, Duration::hours(23));
        // Santiago skips midnight to 01:00 when its DST begins (2026-09-06).
        let santiago: Tz = "America/Santiago".parse().unwrap();
        let skipped = midnight(santiago, NaiveDate::from_ymd_opt(2026, 9, 6).unwrap());
        assert_eq!(skipped.with_timezone(&santiago).format("%H:%M").to_string(), "01:00");
    }
}
