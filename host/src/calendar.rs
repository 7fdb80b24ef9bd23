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
//! * several wall times resolving to the same instant give one slot.
//!
//! A schedule is real-time when its hour field starts with `*` or contains `/`.
//! Nothing here reads the process time zone or the clock: results depend only on the
//! arguments.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

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
}

// croner's Debug dumps every bit field; the text says the same in one line.
impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("Schedule");
        f.field("cron", &self.expr).field("zone", &self.zone).field("real_time", &self.real_time).finish()
    }
}

/// One business period: from an occurrence up to the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub start: DateTime<Utc>,
    /// The next occurrence after `start`, or [`OPEN_END`] if there is none.
    pub end: DateTime<Utc>,
    /// `start` in the business zone: `YYYY-MM-DD` at local midnight, otherwise
    /// `YYYY-MM-DDTHH:MM[:SS]±HH:MM`.
    pub label: String,
}

impl Slot {
    pub fn local_start(&self, zone: Tz) -> DateTime<Tz> {
        self.start.with_timezone(&zone)
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
        Ok(Schedule { cron: parsed, zone: tz, expr: cron.to_string(), real_time, matchable })
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
    pub fn slots_after(&self, after: DateTime<Utc>) -> impl Iterator<Item = Slot> + '_ {
        let mut occurrences = self.occurrences_after(after);
        let mut upcoming: Option<Option<DateTime<Utc>>> = None;
        std::iter::from_fn(move || {
            let start = match upcoming.take() {
                Some(start) => start,
                None => occurrences.next(),
            }?;
            let end = occurrences.next();
            upcoming = Some(end);
            Some(self.slot(start, end.unwrap_or(OPEN_END)))
        })
    }

    /// The slot that starts exactly at `start` (start need not be an occurrence; end =
    /// next occurrence after start).
    pub fn slot_at(&self, start: DateTime<Utc>) -> Slot {
        let end = self.occurrences_after(start).next().unwrap_or(OPEN_END);
        self.slot(start, end)
    }

    fn slot(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> Slot {
        Slot { start, end, label: self.label(start) }
    }

    fn label(&self, start: DateTime<Utc>) -> String {
        let local = start.with_timezone(&self.zone);
        let time = local.time();
        // The second copy of a repeated midnight keeps its offset so labels stay unique.
        let first_copy = local_naive(self.zone, start)
            .and_then(|naive| self.zone.from_local_datetime(&naive).earliest())
            .is_some_and(|earliest| earliest == local);
        let format = if time.num_seconds_from_midnight() == 0 && time.nanosecond() == 0 && first_copy {
            "%Y-%m-%d"
        } else if time.nanosecond() != 0 {
            "%Y-%m-%dT%H:%M:%S%.f%:z"
        } else if time.second() != 0 {
            "%Y-%m-%dT%H:%M:%S%:z"
        } else {
            "%Y-%m-%dT%H:%M%:z"
        };
        local.format(format).to_string()
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
                (end, [if self.real_time { None } else { end }, None])
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
                return (0..60i64)
                    .rev()
                    .filter_map(|back| probe.checked_sub_signed(TimeDelta::seconds(back)))
                    .find_map(exists)
                    .map(|t| t.with_timezone(&Utc));
            }
        }
        None
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
                    && (1..=31).any(|day| {
                        NaiveDate::from_ymd_opt(year, month, day).is_some() && p.day_match(year, month, day).unwrap_or(false)
                    })
            })
        })
}

/// `t` as a wall time in `zone`; `None` instead of chrono's panic at the edge of its range.
fn local_naive(zone: Tz, t: DateTime<Utc>) -> Option<NaiveDateTime> {
    let offset = zone.offset_from_utc_datetime(&t.naive_utc()).fix();
    t.naive_utc().checked_add_signed(TimeDelta::seconds(i64::from(offset.local_minus_utc())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::SecondsFormat;
    use std::time::{Duration, Instant};

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("test instant").with_timezone(&Utc)
    }

    fn sched(cron: &str, zone: &str) -> Schedule {
        Schedule::new(cron, zone).expect("test schedule")
    }

    fn rfc(t: DateTime<Utc>) -> String {
        t.to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    fn starts(s: &Schedule, after: &str, n: usize) -> Vec<String> {
        s.slots_after(utc(after)).take(n).map(|slot| rfc(slot.start)).collect()
    }

    const NY: &str = "America/New_York";
    const LON: &str = "Europe/London";
    const LH: &str = "Australia/Lord_Howe";
    const SH: &str = "Asia/Shanghai";

    /// (zone, cron, after, expected starts). Worked out from the offsets by hand:
    /// New York EST -5 / EDT -4, London GMT / BST +1, Lord Howe +10:30 / +11, Shanghai +8.
    #[rustfmt::skip]
    const CASES: &[(&str, &str, &str, &[&str])] = &[
        // New York spring forward 2026-03-08: 02:00-03:00 EST does not exist.
        (NY, "30 2 * * *", "2026-03-06T12:00:00Z", &["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
        (NY, "30 1 * * *", "2026-03-06T12:00:00Z", &["2026-03-07T06:30:00Z", "2026-03-08T06:30:00Z", "2026-03-09T05:30:00Z"]),
        (NY, "0 0 * * *", "2026-03-06T12:00:00Z", &["2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"]),
        (NY, "*/30 * * * *", "2026-03-08T04:59:00Z", &["2026-03-08T05:00:00Z", "2026-03-08T05:30:00Z", "2026-03-08T06:00:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"]),
        (NY, "30 */2 * * *", "2026-03-08T05:00:00Z", &["2026-03-08T05:30:00Z", "2026-03-08T08:30:00Z"]),
        (NY, "0,30 2,3 * * *", "2026-03-08T05:00:00Z", &["2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:00:00Z"]),
        // New York fall back 2026-11-01: 01:00-02:00 happens in EDT, then again in EST.
        (NY, "30 2 * * *", "2026-10-30T12:00:00Z", &["2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"]),
        (NY, "30 1 * * *", "2026-10-30T12:00:00Z", &["2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]),
        (NY, "30 1 * * *", "2026-11-01T05:45:00Z", &["2026-11-02T06:30:00Z"]),
        (NY, "0 0 * * *", "2026-10-30T12:00:00Z", &["2026-10-31T04:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"]),
        (NY, "*/30 * * * *", "2026-11-01T03:59:00Z", &["2026-11-01T04:00:00Z", "2026-11-01T04:30:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z"]),
        (NY, "*/30 * * * *", "2026-11-01T05:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z"]),
        (NY, "*/30 * * * *", "2026-11-01T05:45:00Z", &["2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"]),
        (NY, "*/30 * * * *", "2026-11-01T06:10:00Z", &["2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"]),
        (NY, "30 1-23/2 * * *", "2026-11-01T04:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T08:30:00Z"]),
        (NY, "30 1-3 * * *", "2026-11-01T04:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T07:30:00Z", "2026-11-01T08:30:00Z"]),
        // London 2026-03-29: 01:00-02:00 GMT does not exist; 2026-10-25: 01:00-02:00 twice.
        (LON, "30 2 * * *", "2026-03-27T12:00:00Z", &["2026-03-28T02:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T01:30:00Z"]),
        (LON, "30 1 * * *", "2026-03-27T12:00:00Z", &["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
        (LON, "0 0 * * *", "2026-03-27T12:00:00Z", &["2026-03-28T00:00:00Z", "2026-03-29T00:00:00Z", "2026-03-29T23:00:00Z"]),
        (LON, "*/30 * * * *", "2026-03-28T23:59:00Z", &["2026-03-29T00:00:00Z", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]),
        (LON, "30 2 * * *", "2026-10-23T12:00:00Z", &["2026-10-24T01:30:00Z", "2026-10-25T02:30:00Z", "2026-10-26T02:30:00Z"]),
        (LON, "30 1 * * *", "2026-10-23T12:00:00Z", &["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),
        (LON, "0 0 * * *", "2026-10-23T12:00:00Z", &["2026-10-23T23:00:00Z", "2026-10-24T23:00:00Z", "2026-10-26T00:00:00Z"]),
        (LON, "*/30 * * * *", "2026-10-24T22:59:00Z", &["2026-10-24T23:00:00Z", "2026-10-24T23:30:00Z", "2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"]),
        // Lord Howe 2026-04-05: 01:30-02:00 twice (+11, then +10:30).
        (LH, "30 2 * * *", "2026-04-03T00:00:00Z", &["2026-04-03T15:30:00Z", "2026-04-04T16:00:00Z", "2026-04-05T16:00:00Z"]),
        (LH, "30 1 * * *", "2026-04-03T00:00:00Z", &["2026-04-03T14:30:00Z", "2026-04-04T14:30:00Z", "2026-04-05T15:00:00Z"]),
        (LH, "0 0 * * *", "2026-04-03T00:00:00Z", &["2026-04-03T13:00:00Z", "2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z"]),
        (LH, "*/30 * * * *", "2026-04-04T13:50:00Z", &["2026-04-04T14:00:00Z", "2026-04-04T14:30:00Z", "2026-04-04T15:00:00Z", "2026-04-04T15:30:00Z"]),
        // Lord Howe 2026-10-04: 02:00-02:30 does not exist.
        (LH, "30 2 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T16:00:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:30:00Z"]),
        (LH, "0 2 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T15:30:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:00:00Z"]),
        (LH, "30 1 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T15:00:00Z", "2026-10-03T15:00:00Z", "2026-10-04T14:30:00Z"]),
        (LH, "0 0 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T13:30:00Z", "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z"]),
        (LH, "*/30 * * * *", "2026-10-03T14:20:00Z", &["2026-10-03T14:30:00Z", "2026-10-03T15:00:00Z", "2026-10-03T15:30:00Z", "2026-10-03T16:00:00Z"]),
        // Shanghai has no DST, so the other zones' transition days are ordinary.
        (SH, "30 2 * * *", "2026-03-07T00:00:00Z", &["2026-03-07T18:30:00Z", "2026-03-08T18:30:00Z"]),
        (SH, "30 1 * * *", "2026-10-31T00:00:00Z", &["2026-10-31T17:30:00Z", "2026-11-01T17:30:00Z"]),
        (SH, "0 0 * * *", "2026-03-07T00:00:00Z", &["2026-03-07T16:00:00Z", "2026-03-08T16:00:00Z"]),
        (SH, "*/30 * * * *", "2026-11-01T05:50:00Z", &["2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"]),
        ("UTC", "0 12 * * *", "2026-03-08T12:00:00Z", &["2026-03-09T12:00:00Z"]),
        // Six fields, seconds first; the hour is the third field.
        (SH, "*/20 * * * * *", "2026-01-01T00:00:00Z", &["2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"]),
        (NY, "15 30 2 * * *", "2026-03-07T00:00:00Z", &["2026-03-07T07:30:15Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:15Z"]),
        (NY, "0 */30 2 * * *", "2026-03-08T05:00:00Z", &["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:30:00Z"]),
        (NY, "0 */30 * * * *", "2026-11-01T05:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z"]),
        // Day-of-month OR day-of-week: the 10th (a Tuesday) or any Friday (6th, 13th).
        (SH, "0 0 10 * 5", "2026-03-01T00:00:00Z", &["2026-03-05T16:00:00Z", "2026-03-09T16:00:00Z", "2026-03-12T16:00:00Z"]),
    ];

    #[test]
    fn occurrences_across_transitions() {
        for (zone, cron, after, expected) in CASES {
            assert_eq!(starts(&sched(cron, zone), after, expected.len()), *expected, "{cron:?} in {zone} after {after}");
        }
    }

    #[test]
    fn chained_next_after_matches_iterator() {
        let cases = [
            (NY, "*/30 * * * *", "2026-11-01T03:00:00Z"), (LH, "*/10 * * * *", "2026-04-04T13:00:00Z"),
            (NY, "*/20 * * * *", "2026-03-08T05:00:00Z"), (LON, "30 1 * * *", "2026-10-20T00:00:00Z"),
        ];
        for (zone, cron, after) in cases {
            let s = sched(cron, zone);
            let all: Vec<Slot> = s.slots_after(utc(after)).take(30).collect();
            let mut prev = utc(after);
            for expected in &all {
                let got = s.next_after(prev).expect("next slot");
                assert_eq!(&got, expected, "{cron:?} in {zone} after {prev}");
                prev = got.start;
            }
            for pair in all.windows(2) {
                assert!(pair[0].start < pair[1].start && pair[0].end == pair[1].start, "{cron:?} in {zone}: {pair:?}");
            }
        }
    }

    /// Minute-by-minute restatement of the rules, for minute-aligned patterns: an instant
    /// fires if its wall time matches (first copy only unless real-time), or, for a
    /// fixed-hour schedule, if a matching wall time was skipped just before it.
    fn brute_force(s: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let matches = |n: NaiveDateTime| s.cron.is_time_matching(&Utc.from_utc_datetime(&n)).expect("match");
        let wall = |t: DateTime<Utc>| t.with_timezone(&s.zone).naive_local();
        let minute = TimeDelta::minutes(1);
        let mut out = Vec::new();
        let mut t = from;
        while t < to {
            let first_copy = s.zone.from_local_datetime(&wall(t)).earliest() == Some(t.with_timezone(&s.zone));
            let mut fires = matches(wall(t)) && (s.real_time || first_copy);
            let mut skipped = wall(t - minute) + minute;
            while !s.real_time && skipped < wall(t) {
                fires |= matches(skipped);
                skipped += minute;
            }
            if fires {
                out.push(t);
            }
            t += minute;
        }
        out
    }

    #[test]
    fn agrees_with_brute_force_around_every_2026_transition() {
        let zones = [NY, LON, LH, SH, "America/Havana", "Antarctica/Troll", "Pacific/Chatham", "Asia/Tehran"];
        let crons = ["*/30 * * * *", "30 2 * * *", "30 1 * * *", "0 0 * * *", "*/7 1-3 * * *"];
        let crons: Vec<&str> = crons.into_iter().chain(["15 */2 * * *", "45 0-3 * * 0", "0 * * * *", "0,30 2,3 * * *"]).collect();
        let (year_start, hour) = (utc("2026-01-01T00:00:00Z"), TimeDelta::hours(1));
        for zone in zones {
            let tz = sched("* * * * *", zone).zone();
            let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
            let transitions: Vec<DateTime<Utc>> =
                (0..24 * 366).map(|h| year_start + hour * h).filter(|&t| offset(t) != offset(t + hour)).collect();
            assert_eq!(transitions.len(), if [SH, "Asia/Tehran"].contains(&zone) { 0 } else { 2 }, "{zone}");
            for &cron in &crons {
                let s = sched(cron, zone);
                for &t in transitions.iter().chain([year_start + TimeDelta::days(40)].iter()) {
                    let (from, to) = (t - TimeDelta::days(1), t + TimeDelta::days(1));
                    let slots = s.slots_after(from - TimeDelta::seconds(1));
                    let got: Vec<_> = slots.map(|slot| slot.start).take_while(|&x| x < to).collect();
                    assert_eq!(got, brute_force(&s, from, to), "{cron:?} in {zone} around {t}");
                }
            }
        }
    }

    #[test]
    fn daily_slot_lengths() {
        let cases = [
            (NY, "2026-03-08T05:00:00Z", 23 * 60), (NY, "2026-11-01T04:00:00Z", 25 * 60), (NY, "2026-03-07T05:00:00Z", 24 * 60),
            (LON, "2026-03-29T00:00:00Z", 23 * 60), (LON, "2026-10-24T23:00:00Z", 25 * 60),
            (LH, "2026-04-04T13:00:00Z", 24 * 60 + 30), (LH, "2026-10-03T13:30:00Z", 23 * 60 + 30),
            (SH, "2026-03-07T16:00:00Z", 24 * 60),
        ];
        for (zone, start, minutes) in cases {
            let s = sched("0 0 * * *", zone);
            let slot = s.next_after(utc(start) - TimeDelta::seconds(1)).expect("daily slot");
            assert_eq!(rfc(slot.start), start, "{zone}");
            assert_eq!((slot.end - slot.start).num_minutes(), minutes, "{zone} {start}");
            assert_eq!(s.slot_at(utc(start)), slot);
        }
    }

    #[test]
    fn labels() {
        let label = |cron: &str, zone: &str, after: &str| sched(cron, zone).next_after(utc(after)).expect("slot").label;
        assert_eq!(label("0 0 * * *", NY, "2026-03-07T12:00:00Z"), "2026-03-08");
        assert_eq!(label("30 2 * * *", NY, "2026-03-07T12:00:00Z"), "2026-03-08T03:00-04:00");
        assert_eq!(label("30 2 * * *", LH, "2026-03-07T00:00:00Z"), "2026-03-08T02:30+11:00");
        assert_eq!(label("15 30 2 * * *", LH, "2026-03-07T00:00:00Z"), "2026-03-08T02:30:15+11:00");
        assert_eq!(label("0 2 * * *", LH, "2026-10-03T00:00:00Z"), "2026-10-04T02:30+11:00");
        assert_eq!(label("0 12 * * *", "UTC", "2026-01-01T00:00:00Z"), "2026-01-01T12:00+00:00");
        let lh: Vec<String> = sched("*/30 * * * *", LH).slots_after(utc("2026-04-04T13:50:00Z")).take(4).map(|s| s.label).collect();
        assert_eq!(lh, ["2026-04-05T01:00+11:00", "2026-04-05T01:30+11:00", "2026-04-05T01:30+10:30", "2026-04-05T02:00+10:30"]);
        // Havana repeats 00:00-01:00 on 2026-11-01 (CDT -4, then CST -5).
        let cu: Vec<String> = sched("0 * * * *", "America/Havana").slots_after(utc("2026-11-01T03:30:00Z")).take(3).map(|s| s.label).collect();
        assert_eq!(cu, ["2026-11-01", "2026-11-01T00:00-05:00", "2026-11-01T01:00-05:00"]);
        let slot = sched("0 0 * * *", SH).slot_at(utc("2026-03-07T16:00:00Z"));
        assert_eq!(slot.local_start(chrono_tz::Asia::Shanghai).to_rfc3339(), "2026-03-08T00:00:00+08:00");
    }

    #[test]
    fn slot_at_any_instant() {
        let s = sched("0 0 * * *", NY);
        let slot = s.slot_at(utc("2026-03-08T12:34:56Z"));
        assert_eq!(rfc(slot.start), "2026-03-08T12:34:56Z");
        assert_eq!(rfc(slot.end), "2026-03-09T04:00:00Z");
        assert_eq!(slot.label, "2026-03-08T08:34:56-04:00");
        let frac = s.slot_at(utc("2026-03-08T12:00:00.250Z"));
        assert_eq!(frac.label, "2026-03-08T08:00:00.250-04:00");
    }

    #[test]
    fn never_matching_pattern_ends_promptly() {
        let started = Instant::now();
        for cron in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 0 30 2 *", ",,, * * * *", "0 , * * *"] {
            let s = sched(cron, NY);
            assert_eq!(s.next_after(utc("2026-01-01T00:00:00Z")), None, "{cron}");
            assert_eq!(s.slots_after(utc("2026-01-01T00:00:00Z")).count(), 0);
            assert_eq!(s.slot_at(utc("2026-01-01T00:00:00Z")).end, OPEN_END);
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        assert_eq!(rfc(OPEN_END), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn extreme_instants_do_not_panic() {
        for zone in ["Pacific/Kiritimati", "Pacific/Pago_Pago", NY, "UTC"] {
            let s = sched("*/30 * * * *", zone);
            assert_eq!(s.next_after(DateTime::<Utc>::MAX_UTC), None);
            let _ = s.slot_at(DateTime::<Utc>::MAX_UTC);
            let _ = s.slot_at(DateTime::<Utc>::MIN_UTC);
            let _ = s.next_after(DateTime::<Utc>::MIN_UTC);
        }
        let first = sched("0 0 * * *", "UTC").next_after(DateTime::<Utc>::MIN_UTC).expect("croner starts at year 1");
        assert_eq!(rfc(first.start), "0001-01-01T00:00:00Z");
    }

    #[test]
    fn errors() {
        let bad_cron = [
            "", "   ", "garbage", "61 * * * *", "* 24 * * *", "0 0 32 * *", "0 0 * 13 *", "0 0 * * 8",
            "* * * *", "* * * * * * *", "*/0 * * * *", "5-1 * * * *", "99999999999 * * * *", "- * * * *",
            "*/ * * * *", "1-/2 * * * *", "0 0 1#9 * *", "0 0 * * 1#6", "🙂 * * * *", "@never",
            "0 ? * * *", "L * * * *", "0 0 W * *", "0 0 * * #",
        ];
        for cron in bad_cron {
            match Schedule::new(cron, "UTC") {
                Err(e @ CalendarError::Cron { .. }) => {
                    assert!(e.to_string().starts_with(&format!("invalid cron expression {cron:?}: ")), "{e}")
                }
                Ok(s) => panic!("{cron:?} was accepted as {s:?}"),
                Err(e) => panic!("{cron:?} gave {e:?}"),
            }
        }
        let e = Schedule::new("0 0 * * *", "Mars/Olympus").expect_err("bad zone");
        assert_eq!(e.to_string(), "unknown time zone \"Mars/Olympus\" (expected an IANA name such as Asia/Shanghai)");
        assert!(matches!(Schedule::new("0 0 * * *", ""), Err(CalendarError::Zone(_))));
        let e = Schedule::new("61 * * * *", "UTC").expect_err("bad cron").to_string();
        assert!(e.starts_with("invalid cron expression \"61 * * * *\": ") && e.len() > 35, "{e}");
        let ok = sched("@hourly", "UTC");
        assert!(ok.real_time && ok.cron() == "@hourly" && ok.zone() == chrono_tz::UTC);
    }

    #[test]
    fn real_time_rule_reads_the_hour_field() {
        let cases = [("* * * * *", true), ("0 */2 * * *", true), ("0 1-23/2 * * *", true), ("0 0 * * * *", true), ("@hourly", true)];
        let fixed = ["0 2 * * *", "0 1-3 * * *", "0 1,13 * * *", "*/5 2 * * *", "0 * 2 * * *", "@daily"].map(|c| (c, false));
        for (cron, real) in cases.into_iter().chain(fixed) {
            assert_eq!(sched(cron, NY).real_time, real, "{cron}");
        }
    }

    #[test]
    fn per_minute_month_is_fast_and_complete() {
        // New York local months: March loses the hour 02:00-03:00, November repeats 01:00-02:00.
        let months = [("2026-03-01T05:00:00Z", "2026-04-01T04:00:00Z", 31 * 1440 - 60), ("2026-11-01T04:00:00Z", "2026-12-01T05:00:00Z", 30 * 1440 + 60)];
        for (from, to, expected) in months {
            let s = sched("* * * * *", NY);
            let started = Instant::now();
            let (from, to) = (utc(from) - TimeDelta::seconds(1), utc(to));
            let slots: Vec<Slot> = s.slots_after(from).take_while(|slot| slot.start < to).collect();
            let elapsed = started.elapsed();
            assert_eq!(slots.len(), expected);
            assert!(slots.windows(2).all(|w| w[1].start - w[0].start == TimeDelta::minutes(1) && w[0].end == w[1].start));
            let limit = Duration::from_secs(if cfg!(debug_assertions) { 30 } else { 1 });
            assert!(elapsed < limit, "{} slots took {elapsed:?}", slots.len());
        }
    }

    #[test]
    fn process_time_zone_is_ignored() {
        let run = || {
            let mut out: Vec<Slot> = sched("*/30 * * * *", NY).slots_after(utc("2026-11-01T03:59:00Z")).take(8).collect();
            out.extend(sched("0 0 * * *", LON).slots_after(utc("2026-03-27T12:00:00Z")).take(3));
            out.push(sched("30 1 * * *", LH).slot_at(utc("2026-04-04T14:30:00Z")));
            out
        };
        let baseline = run();
        assert_eq!((rfc(baseline[4].start), rfc(baseline[10].start)), ("2026-11-01T06:00:00Z".into(), "2026-03-29T23:00:00Z".into()));
        let saved = std::env::var_os("TZ");
        for tz in ["Asia/Tokyo", "America/Los_Angeles", "UTC", "Australia/Lord_Howe", "Europe/London"] {
            std::env::set_var("TZ", tz);
            assert_eq!(run(), baseline, "TZ={tz}");
        }
        match saved {
            Some(v) => std::env::set_var("TZ", v),
            None => std::env::remove_var("TZ"),
        }
    }
}
