//! Business calendars: a cron expression read as wall-clock time in an IANA zone.
//!
//! Each occurrence starts a *slot* that lasts until the next occurrence. Occurrences
//! follow cronie's daylight-saving rules:
//!
//! * a wall time that exists once fires at that instant;
//! * a wall time skipped by a spring-forward gap fires at the first instant after the
//!   gap for a fixed-hour schedule, and not at all for a real-time schedule;
//! * a wall time repeated by a fall-back fires once (first copy) for a fixed-hour
//!   schedule, and in both copies for a real-time schedule;
//! * several wall times resolving to the same instant give one slot;
//! * a wall time on a local *day* that has no instants at all (Samoa skipped
//!   2011-12-30) does not fire: that business day never happened, so it has no slot.
//!
//! A slot's label names the business period the schedule defines, in one form per
//! schedule: a schedule that fires at most once a day names the local day
//! (`2018-11-04`, also when a gap moved that day's occurrence to 01:00); a sub-daily one
//! always names the local time with its offset (`2026-12-03T00:15+00:00`, and
//! `2026-12-03T00:00+00:00` at midnight). An instant that is not an occurrence (a slot
//! given by hand) is named by its local time.
//!
//! A schedule is real-time when its hour field starts with `*` or contains `/`.
//! Nothing here reads the process time zone or the clock: results depend only on the
//! arguments.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::str::FromStr;
use std::sync::Arc;

use business::{Business, BusinessError, Facts, Roll, Rule};
use chrono::{DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use serde::Serialize;
use source::{BusinessSource, SourceError};

/// `end` of a slot whose schedule never fires again: 9999-12-31T23:59:59Z, the latest
/// instant that still has a four-digit year, so RFC 3339 consumers accept it.
pub const OPEN_END: DateTime<Utc> = match NaiveDate::from_ymd_opt(9999, 12, 31) {
    Some(date) => match date.and_hms_opt(23, 59, 59) {
        Some(naive) => DateTime::from_naive_utc_and_offset(naive, Utc),
        None => DateTime::<Utc>::MAX_UTC,
    },
    None => DateTime::<Utc>::MAX_UTC,
};

/// Largest change of UTC offset at one transition that the search allows for. DST
/// shifts are at most 2h (Antarctica/Troll); Lord Howe's is 30 minutes.
const MAX_DST_SHIFT: TimeDelta = TimeDelta::hours(3);

/// How far past a nonexistent wall time to look for the end of its gap. Gaps are at
/// most a day (Samoa skipped 2011-12-30), so this only guards against a broken zone.
const GAP_SCAN_MINUTES: u32 = 48 * 60;

#[derive(Debug, thiserror::Error)]
pub enum CalendarError {
    #[error("invalid cron expression {expr:?}: {reason}")]
    Cron { expr: String, reason: String },
    #[error("unknown time zone {0:?} (expected an IANA name such as Asia/Shanghai)")]
    Zone(String),
}

/// A cron expression (5 fields, or 6 with seconds first) in a business time zone.
#[derive(Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
    expr: String,
    real_time: bool,
    /// Whether any wall time matches at all; see [`can_match`].
    matchable: bool,
    /// Whether it fires at most once a local day (one time of day); see [`once_a_day`].
    daily: bool,
    /// Holiday calendars and a business-day rule, if the schedule has them, with what
    /// they were built from (as the database stores it).
    business: Option<Arc<(Business, BusinessSource)>>,
}

// croner's Debug dumps every bit field; the text says the same in one line.
impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("Schedule");
        let business = self.business().map(Business::summary);
        f.field("cron", &self.expr).field("zone", &self.zone).field("real_time", &self.real_time).field("business", &business).finish()
    }
}

/// One business period: from an occurrence up to the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub start: DateTime<Utc>,
    /// The next occurrence after `start`, or [`OPEN_END`] if there is none.
    pub end: DateTime<Utc>,
    /// The business period: `YYYY-MM-DD` for a schedule that fires at most once a day,
    /// otherwise `YYYY-MM-DDTHH:MM[:SS]±HH:MM` (see the module's docs).
    pub label: String,
    /// Its business day, for a schedule with holiday calendars.
    pub business: Option<Facts>,
}

impl Slot {
    pub fn local_start(&self, zone: Tz) -> DateTime<Tz> {
        self.start.with_timezone(&zone)
    }

    /// How long the slot lasts, in days, hours, minutes and seconds (`31d`, `1d 1h`,
    /// `23h 30m`); `-` for a slot with no end.
    pub fn length(&self) -> String {
        if self.end == OPEN_END {
            return "-".into();
        }
        let total = (self.end - self.start).num_seconds();
        let parts = [(total / 86_400, "d"), (total % 86_400 / 3_600, "h"), (total % 3_600 / 60, "m"), (total % 60, "s")];
        let text: Vec<String> = parts.iter().filter(|(n, _)| *n != 0).map(|(n, unit)| format!("{n}{unit}")).collect();
        if text.is_empty() {
            "0s".into()
        } else {
            text.join(" ")
        }
    }
}

impl Schedule {
    pub fn new(cron: &str, zone: &str) -> Result<Schedule, CalendarError> {
        let parsed = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(cron)
            .map_err(|e| CalendarError::Cron { expr: cron.to_string(), reason: e.to_string() })?;
        let tz = Tz::from_str(zone.trim()).map_err(|_| CalendarError::Zone(zone.to_string()))?;
        // croner's own copy of the text has nicknames such as @hourly expanded.
        let real_time = hour_field_is_real_time(parsed.pattern.as_str());
        let matchable = can_match(&parsed);
        let daily = once_a_day(&parsed);
        Ok(Schedule { cron: parsed, zone: tz, expr: cron.to_string(), real_time, matchable, daily, business: None })
    }

    /// The schedule run by holiday calendars and a business-day rule. A rule that moves
    /// or picks days needs a cron that fires once a day (`business_day` one that fires
    /// every day: it gives the time); cron's own `L`, `W` and `#` days are refused, with
    /// the rule that means what they mean on business days.
    pub fn with_business(mut self, source: &BusinessSource) -> Result<Schedule, SourceError> {
        business::check_cron(&self.expr)?;
        let business = source.build()?;
        let fields: Vec<&str> = self.cron.pattern.as_str().split_whitespace().collect();
        let days = fields.get(fields.len().saturating_sub(3)..).unwrap_or_default();
        if let [_, _, _] = days {
            let any = |f: &&str| *f == "*" || *f == "?";
            let every_day = days.iter().all(any);
            match business.rule() {
                Rule::Nth { .. } if !(self.daily && every_day) => {
                    let why = format!("cron {:?}: business_day picks the days; the cron gives only the time, once a day (e.g. \"0 6 * * *\")", self.expr);
                    return Err(BusinessError::Cron(why).into());
                }
                Rule::Roll(roll) if *roll != Roll::Skip && !self.daily => {
                    let why = format!("cron {:?}: roll = \"{}\" moves a day's one slot; it needs a cron that fires once a day", self.expr, roll.as_str());
                    return Err(BusinessError::Cron(why).into());
                }
                _ => {}
            }
        }
        self.business = Some(Arc::new((business, source.clone())));
        Ok(self)
    }

    pub fn business(&self) -> Option<&Business> {
        self.business.as_deref().map(|(b, _)| b)
    }

    /// What the business calendar was built from, to store.
    pub fn business_source(&self) -> Option<&BusinessSource> {
        self.business.as_deref().map(|(_, s)| s)
    }

    pub fn cron(&self) -> &str {
        &self.expr
    }

    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first slot starting strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<Slot> {
        self.slots_after(after).next()
    }

    /// Slots starting strictly after `after`, in increasing order (an iterator; lazily
    /// computed). It ends when croner's search limit (year 5000) is reached.
    pub fn slots_after(&self, after: DateTime<Utc>) -> Box<dyn Iterator<Item = Slot> + Send + '_> {
        if let Some(business) = self.business() {
            let nominal = self.occurrences_after(after.checked_sub_signed(business::LOOK_BACK).unwrap_or(after));
            let mut placed = business::placed_after(self, business, nominal, after).peekable();
            return Box::new(std::iter::from_fn(move || {
                let (start, _, nominal, date) = placed.next()?;
                let end = placed.peek().map_or(OPEN_END, |next| next.0);
                Some(Slot { start, end, label: nominal.format("%Y-%m-%d").to_string(), business: Some(business.facts(nominal, date)) })
            }));
        }
        let mut occurrences = self.occurrences_after(after);
        let mut upcoming: Option<Option<DateTime<Utc>>> = None;
        Box::new(std::iter::from_fn(move || {
            let start = match upcoming.take() {
                Some(start) => start,
                None => occurrences.next(),
            }?;
            let end = occurrences.next();
            upcoming = Some(end);
            Some(self.slot(start, end.unwrap_or(OPEN_END), true))
        }))
    }

    /// Whether a slot of this schedule starts exactly at `start`.
    pub fn is_on_calendar(&self, start: DateTime<Utc>) -> bool {
        start.checked_sub_signed(TimeDelta::microseconds(1)).is_some_and(|before| self.slots_after(before).next().is_some_and(|s| s.start == start))
    }

    /// The slot that starts exactly at `start` (start need not be an occurrence; end =
    /// next occurrence after start).
    pub fn slot_at(&self, start: DateTime<Utc>) -> Slot {
        if self.business.is_some() {
            let before = start.checked_sub_signed(TimeDelta::microseconds(1)).unwrap_or(start);
            if let Some(slot) = self.slots_after(before).next().filter(|s| s.start == start) {
                return slot;
            }
            let end = self.slots_after(start).next().map_or(OPEN_END, |s| s.start);
            return Slot { start, end, label: self.time_label(start), business: None };
        }
        let end = self.occurrences_after(start).next().unwrap_or(OPEN_END);
        self.slot(start, end, self.is_on_calendar(start))
    }

    fn slot(&self, start: DateTime<Utc>, end: DateTime<Utc>, on_calendar: bool) -> Slot {
        Slot { start, end, label: self.label(start, on_calendar), business: None }
    }

    fn label(&self, start: DateTime<Utc>, on_calendar: bool) -> String {
        if self.daily && on_calendar {
            if let Some(day) = self.business_day(start) {
                return day.format("%Y-%m-%d").to_string();
            }
        }
        self.time_label(start)
    }

    /// The period unit this schedule means when its task declares none.
    pub fn default_period(&self) -> Period {
        if let Some(Rule::Nth { of, .. }) = self.business().map(Business::rule) {
            return *of;
        }
        Period::default_for(self.cron.pattern.as_str(), self.daily)
    }

    /// The name of the `unit` period holding the slot that starts at `start` (see
    /// [`period`]): for `slot`, its local time and offset; else of its business day (with
    /// a business rule, of the day it is for).
    pub fn period_label(&self, unit: Period, start: DateTime<Utc>) -> String {
        // A rolled slot is for its nominal day's period (the 25th's, run on the 24th).
        if let (Some(_), false) = (&self.business, unit == Period::Slot) {
            if let Some(facts) = self.slot_at(start).business {
                return unit.day_label(facts.nominal);
            }
        }
        match unit {
            Period::Slot => self.time_label(start),
            _ => unit.day_label(self.business_day(start).unwrap_or_else(|| start.with_timezone(&self.zone).date_naive())),
        }
    }

    /// The wall time the cron matches on local `day` (its first), if it fires that day.
    fn wall_time_on(&self, day: NaiveDate) -> Option<NaiveTime> {
        let midnight = Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0)?);
        let naive = self.cron.find_next_occurrence(&midnight, true).ok()?.naive_utc();
        (naive.date() == day).then_some(naive.time())
    }

    /// The instant of wall time `naive` as a slot resolves it: the earlier of a repeated
    /// time, the end of a gap for a skipped one, none on a day the zone skipped.
    fn resolve_wall(&self, naive: NaiveDateTime) -> Option<DateTime<Utc>> {
        match self.zone.from_local_datetime(&naive) {
            LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(a, b) => Some(a.min(b).with_timezone(&Utc)),
            LocalResult::None if self.day_missing(naive) => None,
            LocalResult::None => self.gap_end(naive),
        }
    }

    /// `start` as local time with its offset, to the minute (seconds when not zero).
    fn time_label(&self, start: DateTime<Utc>) -> String {
        let local = start.with_timezone(&self.zone);
        let time = local.time();
        let format = if time.nanosecond() != 0 {
            "%Y-%m-%dT%H:%M:%S%.f%:z"
        } else if time.second() != 0 {
            "%Y-%m-%dT%H:%M:%S%:z"
        } else {
            "%Y-%m-%dT%H:%M%:z"
        };
        local.format(format).to_string()
    }

    /// The local day an occurrence belongs to: the day of the wall time that matched —
    /// `start`'s own, or, when a gap moved the occurrence, the skipped one.
    fn business_day(&self, start: DateTime<Utc>) -> Option<NaiveDate> {
        let wall = local_naive(self.zone, start)?;
        let own = self.cron.is_time_matching(&Utc.from_utc_datetime(&wall)).unwrap_or(false);
        let before = local_naive(self.zone, start.checked_sub_signed(TimeDelta::seconds(1))?)?;
        if !own && wall - before > TimeDelta::seconds(1) {
            // A gap just before `start`: the matching wall time lies inside it.
            let skipped = before.checked_add_signed(TimeDelta::seconds(1))?;
            let matched = self.cron.find_next_occurrence(&Utc.from_utc_datetime(&skipped), true).ok()?.naive_utc();
            if matched < wall {
                return Some(matched.date());
            }
        }
        Some(wall.date())
    }

    /// Whether the local day of `naive` has no instant at all (the zone jumped over it).
    fn day_missing(&self, naive: NaiveDateTime) -> bool {
        let midnight = naive.date().and_hms_opt(0, 0, 0).expect("midnight");
        self.zone.from_local_datetime(&midnight).earliest().is_none()
            && self.gap_end(midnight).and_then(|end| local_naive(self.zone, end)).is_some_and(|first| first.date() > naive.date())
    }

    fn occurrences_after(&self, after: DateTime<Utc>) -> Occurrences<'_> {
        Occurrences { schedule: self, floor: after, heap: BinaryHeap::new(), upcoming: None, scan_from: self.scan_start(after) }
    }

    /// The wall time from which to enumerate so that no occurrence after `after` is missed.
    fn scan_start(&self, after: DateTime<Utc>) -> Option<NaiveDateTime> {
        let wall = local_naive(self.zone, after)?.with_nanosecond(0)?;
        // Only a fall-back soon after `after` can put a later instant on an earlier wall
        // time (the second copy of the repeated hour); a gap never does.
        let offset_at = |t: DateTime<Utc>| self.zone.offset_from_utc_datetime(&t.naive_utc()).fix();
        let soon = after.checked_add_signed(MAX_DST_SHIFT).map(offset_at);
        if soon == Some(offset_at(after)) {
            Some(wall)
        } else {
            wall.checked_sub_signed(MAX_DST_SHIFT)
        }
    }

    /// The next wall time matching the pattern, resolved to instants in the zone.
    fn candidate(&self, from: NaiveDateTime, inclusive: bool) -> Option<Candidate> {
        if !self.matchable {
            return None;
        }
        // Croner enumerates in UTC, where every wall time exists exactly once.
        let probe = Utc.from_utc_datetime(&from);
        let naive = self.cron.find_next_occurrence(&probe, inclusive).ok()?.naive_utc();
        let utc = |t: DateTime<Tz>| t.with_timezone(&Utc);
        let (low, fires) = match self.zone.from_local_datetime(&naive) {
            LocalResult::Single(t) => (Some(utc(t)), [Some(utc(t)), None]),
            LocalResult::Ambiguous(a, b) => {
                let (first, second) = (utc(a).min(utc(b)), utc(a).max(utc(b)));
                (Some(first), [Some(first), self.real_time.then_some(second)])
            }
            LocalResult::None => {
                let end = self.gap_end(naive);
                let fires = !self.real_time && !self.day_missing(naive);
                (end, [if fires { end } else { None }, None])
            }
        };
        Some(Candidate { naive, low, fires })
    }

    /// The first instant whose wall time is after the nonexistent `naive`.
    fn gap_end(&self, naive: NaiveDateTime) -> Option<DateTime<Utc>> {
        let exists = |t: NaiveDateTime| self.zone.from_local_datetime(&t).earliest();
        let mut probe = naive;
        for _ in 0..GAP_SCAN_MINUTES {
            probe = probe.checked_add_signed(TimeDelta::minutes(1))?;
            if exists(probe).is_some() {
                // The previous minute was still in the gap, so it ends within 59s before `probe`.
                return (0..60i64).rev().filter_map(|back| probe.checked_sub_signed(TimeDelta::seconds(back))).find_map(exists).map(|t| t.with_timezone(&Utc));
            }
        }
        None
    }
}

/// An instant as an operator may write it, in every form Almanac prints: RFC 3339
/// (`2026-10-01T09:00:00+02:00`), a slot label (`2026-10-01T09:00+02:00`), UTC as
/// `almanac jobs` prints it (`2026-10-01 07:00:00`, seconds optional), or a date meaning
/// midnight in `zone` (the first instant of that day if midnight falls in a gap).
pub fn parse_instant(text: &str, zone: Tz) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(t) = DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M%:z") {
        return Ok(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(Utc.from_utc_datetime(&naive));
        }
    }
    let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") else {
        return Err(format!(
            "{text:?} is not an instant: give RFC 3339 (2026-10-01T09:00:00+02:00), a slot label (2026-10-01T09:00+02:00), \
             UTC as `almanac jobs` prints it (2026-10-01 07:00:00) or a date in the schedule's zone (2026-10-01)"
        ));
    };
    let midnight = date.and_hms_opt(0, 0, 0).expect("midnight");
    (0..48 * 60)
        .filter_map(|m| zone.from_local_datetime(&(midnight + TimeDelta::minutes(m))).earliest())
        .next()
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| format!("{text:?}: no such day in {zone}"))
}

impl Schedule {
    /// The start of a slot written as an operator may write it ([`parse_instant`]); a
    /// date names the slot labelled with it when the schedule names its slots by day
    /// (`2026-10-01` is that day's 09:00 for `0 9 * * *`), else midnight.
    pub fn parse_slot(&self, text: &str) -> Result<DateTime<Utc>, String> {
        let at = parse_instant(text, self.zone)?;
        if self.daily && NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").is_ok() {
            let before = at.checked_sub_signed(TimeDelta::microseconds(1)).unwrap_or(at);
            if let Some(slot) = self.slots_after(before).next().filter(|s| s.label == text.trim()) {
                return Ok(slot.start);
            }
        }
        Ok(at)
    }
}

impl business::Cron for Schedule {
    fn day_of(&self, at: DateTime<Utc>) -> Option<NaiveDate> {
        self.business_day(at)
    }
    fn wall_time_on(&self, day: NaiveDate) -> Option<NaiveTime> {
        Schedule::wall_time_on(self, day)
    }
    fn resolve_wall(&self, naive: NaiveDateTime) -> Option<DateTime<Utc>> {
        Schedule::resolve_wall(self, naive)
    }
}

/// A matching wall time and what it resolves to.
struct Candidate {
    naive: NaiveDateTime,
    /// The earliest instant whose wall time is at or after `naive`; every later
    /// candidate resolves to this instant or a later one. `None` if unknown.
    low: Option<DateTime<Utc>>,
    fires: [Option<DateTime<Utc>>; 2],
}

/// Occurrence instants after `floor`, increasing and without duplicates.
///
/// Wall times are enumerated in order, but their instants are not: the second copy of a
/// repeated hour comes after the wall times that follow it. Instants wait in a min-heap
/// until the next unprocessed wall time can only resolve to something later.
struct Occurrences<'a> {
    schedule: &'a Schedule,
    floor: DateTime<Utc>,
    heap: BinaryHeap<Reverse<DateTime<Utc>>>,
    upcoming: Option<Candidate>,
    /// Where the first search starts; taken on the first call so creation stays cheap.
    scan_from: Option<NaiveDateTime>,
}

impl Iterator for Occurrences<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        if let Some(from) = self.scan_from.take() {
            self.upcoming = self.schedule.candidate(from, true);
        }
        loop {
            if let Some(&Reverse(t)) = self.heap.peek() {
                if t <= self.floor {
                    self.heap.pop();
                    continue;
                }
                let settled = match &self.upcoming {
                    None => true,
                    Some(next) => next.low.is_some_and(|low| t <= low),
                };
                if settled {
                    self.heap.pop();
                    self.floor = t;
                    return Some(t);
                }
            }
            let current = self.upcoming.take()?;
            self.heap.extend(current.fires.into_iter().flatten().map(Reverse));
            self.upcoming = self.schedule.candidate(current.naive, false);
        }
    }
}

/// cronie's rule, from the hour field's text: `*`, `*/2` or `1-23/2` is real-time.
fn hour_field_is_real_time(pattern: &str) -> bool {
    let fields: Vec<&str> = pattern.split_whitespace().collect();
    let hour = match fields.len() {
        5 => fields[1],
        6 => fields[2],
        _ => return false,
    };
    hour.starts_with('*') || hour.contains('/')
}

/// croner gives up on a pattern that never matches (`0 0 30 2 *`, or `,,, * * * *` with
/// an empty minute set) only after searching to year 5000, which takes seconds. Time
/// fields are independent of each other and of the date, and Gregorian dates (weekdays
/// included) repeat every 400 years, so this decides it in a few thousand checks.
fn can_match(cron: &Cron) -> bool {
    let p = &cron.pattern;
    let time_ok = (0..60).any(|v| p.second_match(v).unwrap_or(false))
        && (0..60).any(|v| p.minute_match(v).unwrap_or(false))
        && (0..24).any(|v| p.hour_match(v).unwrap_or(false));
    time_ok
        && (2000..2400).any(|year| {
            (1..=12).any(|month| {
                p.month_match(month).unwrap_or(false)
                    && (1..=31).any(|day| NaiveDate::from_ymd_opt(year, month, day).is_some() && p.day_match(year, month, day).unwrap_or(false))
            })
        })
}

/// Whether the pattern matches exactly one time of day (one second, minute and hour),
/// so it fires at most once a local day: its slots are named by their day.
fn once_a_day(cron: &Cron) -> bool {
    let p = &cron.pattern;
    let count = |n: u32, matches: &dyn Fn(u32) -> bool| (0..n).filter(|&v| matches(v)).count();
    count(60, &|v| p.second_match(v).unwrap_or(false)) == 1
        && count(60, &|v| p.minute_match(v).unwrap_or(false)) == 1
        && count(24, &|v| p.hour_match(v).unwrap_or(false)) == 1
}

/// `t` as a wall time in `zone`; `None` instead of chrono's panic at the edge of its range.
fn local_naive(zone: Tz, t: DateTime<Utc>) -> Option<NaiveDateTime> {
    let offset = zone.offset_from_utc_datetime(&t.naive_utc()).fix();
    t.naive_utc().checked_add_signed(TimeDelta::seconds(i64::from(offset.local_minus_utc())))
}

// The calendar as the database checks it. `almanac.enqueue` (SQL, no Rust at hand) must
// refuse a slot that is not on a task's calendar; matching cron in PL/pgSQL would be a
// second implementation that drifts. Instead a host publishes, with each schedule, what
// croner itself says: the seconds, minutes and hours that match, and the local days that
// match within a window around now (day-of-month, weekday, `L`, `W`, `#` and their
// combination resolved here). The SQL check is set membership of the slot's wall time.
/// Days published either side of today: a year back covers any backfill horizon worth
/// enqueueing into by hand, a year ahead any slot worth enqueueing early.
pub const WINDOW_DAYS: i64 = 400;
/// A host republishes once fewer days than this remain ahead.
pub const REFRESH_DAYS: i64 = 300;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Published {
    pub seconds: Vec<u32>,
    pub minutes: Vec<u32>,
    pub hours: Vec<u32>,
    /// Local days with occurrences, within [`from`, `to`].
    pub days: Vec<NaiveDate>,
    pub from: NaiveDate,
    pub to: NaiveDate,
}

impl Schedule {
    /// What `almanac.enqueue` checks a slot against, for the days around `now`.
    pub fn published(&self, now: DateTime<Utc>) -> Published {
        let pattern = &self.cron.pattern;
        let today = local_naive(self.zone, now).map_or(now.date_naive(), |t| t.date());
        let (from, to) = (today - TimeDelta::days(WINDOW_DAYS), today + TimeDelta::days(WINDOW_DAYS));
        let days = match &self.business {
            // The business days slots run on (a rolled slot's, not its nominal day's).
            Some(_) => {
                let start = parse_instant(&from.to_string(), self.zone).unwrap_or(now);
                let slots = self.slots_after(start - TimeDelta::microseconds(1));
                slots.filter_map(|s| s.business.map(|b| b.date)).take_while(|d| *d <= to).collect()
            }
            None => from
                .iter_days()
                .take_while(|d| *d <= to)
                .filter(|d| pattern.month_match(d.month()).unwrap_or(false) && pattern.day_match(d.year(), d.month(), d.day()).unwrap_or(false))
                .collect(),
        };
        Published {
            seconds: (0..60).filter(|s| pattern.second_match(*s).unwrap_or(false)).collect(),
            minutes: (0..60).filter(|m| pattern.minute_match(*m).unwrap_or(false)).collect(),
            hours: (0..24).filter(|h| pattern.hour_match(*h).unwrap_or(false)).collect(),
            days,
            from,
            to,
        }
    }

    /// The published calendar as stored (`almanac.schedules.calendar`).
    pub fn published_json(&self, now: DateTime<Utc>) -> serde_json::Value {
        serde_json::to_value(self.published(now)).expect("plain numbers and dates")
    }
}

pub mod business;
pub mod holidays;
pub mod period;
pub mod source;
pub use period::Period;

#[cfg(test)]
mod tests;
