//! Holiday calendars: a named set of days that are not business days, and the weekdays
//! that never are (the weekend), supplied by the user — an iCalendar file and/or a list
//! of dates. Almanac ships no holiday data: which days a billing team closes is its own
//! decision, and a calendar nobody extended is a warning, not a guess.
//!
//! From an iCalendar file every all-day `VEVENT` is a closed day (each day of a multi-day
//! one), its `SUMMARY` the reason; `RRULE`, `RDATE`, `EXDATE` and `RECURRENCE-ID`
//! overrides are honoured (the `rrule` crate expands the rules); timed events and
//! `STATUS:CANCELLED` ones are not closed days. A calendar's version is the digest of what
//! it closes, so two files that say the same are one version.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Utc, Weekday};
use sha2::{Digest, Sha256};

/// Recurring holidays are expanded up to the end of this year: a yearly rule with no end
/// closes its day every year of any horizon a schedule is run over.
const RECUR_THROUGH_YEAR: i32 = 2100;

/// At most this many closed days per calendar: a `FREQ=DAILY` rule with no end would
/// otherwise close every day to 2100, which is a mistake worth naming.
const MAX_DAYS: usize = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum HolidayError {
    #[error("calendar {calendar:?}: {reason}")]
    Ics { calendar: String, reason: String },
    #[error("calendar {calendar:?}: {day:?} is not a date (YYYY-MM-DD)")]
    Date { calendar: String, day: String },
    #[error("weekend {0:?}: expected weekday names such as sat,sun or fri,sat (or none)")]
    Weekend(String),
}

/// One named holiday calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holidays {
    pub name: String,
    /// Indexed by [`Weekday::num_days_from_monday`].
    weekend: [bool; 7],
    days: BTreeMap<NaiveDate, String>,
    /// The last day of the last year holding a dated (not recurring) entry: the year a
    /// calendar of movable feasts must be extended after. `None` without dated entries.
    listed_through: Option<NaiveDate>,
}

impl Holidays {
    pub fn new(name: &str, weekend: &[Weekday]) -> Holidays {
        let mut days = [false; 7];
        for day in weekend {
            days[day.num_days_from_monday() as usize] = true;
        }
        Holidays { name: name.to_owned(), weekend: days, days: BTreeMap::new(), listed_through: None }
    }

    /// Close `day` for `reason` (a dated entry: it counts for [`Holidays::listed_through`]).
    pub fn close(&mut self, day: NaiveDate, reason: &str) {
        self.close_day(day, reason, true);
    }

    /// Close the days listed as `YYYY-MM-DD` (optionally `YYYY-MM-DD Name`).
    pub fn close_listed(&mut self, entries: &[String]) -> Result<(), HolidayError> {
        for entry in entries {
            let (day, reason) = entry.trim().split_once(' ').map_or((entry.trim(), "holiday"), |(d, r)| (d, r.trim()));
            let date = NaiveDate::parse_from_str(day, "%Y-%m-%d").map_err(|_| HolidayError::Date { calendar: self.name.clone(), day: entry.clone() })?;
            self.close(date, reason);
        }
        Ok(())
    }

    fn close_day(&mut self, day: NaiveDate, reason: &str, dated: bool) {
        // The first name given for a day stays its reason.
        self.days.entry(day).or_insert_with(|| reason.to_owned());
        if dated {
            let end = NaiveDate::from_ymd_opt(day.year(), 12, 31);
            self.listed_through = self.listed_through.max(end);
        }
    }

    /// Close the all-day events of an iCalendar text.
    pub fn close_ics(&mut self, text: &str) -> Result<(), HolidayError> {
        let name = self.name.clone();
        let error = |reason: String| HolidayError::Ics { calendar: name.clone(), reason };
        let unfolded = icalendar::parser::unfold(text);
        let calendar = icalendar::parser::read_calendar(&unfolded).map_err(|e| error(format!("not an iCalendar file: {}", first_line(&e))))?;
        let mut events = Vec::new();
        collect_events(&calendar.components, &mut events);
        let events: Vec<Option<Event>> = events.into_iter().map(Event::read).collect::<Result<_, String>>().map_err(error)?;
        let events: Vec<Event> = events.into_iter().flatten().collect();
        // An override (RECURRENCE-ID) replaces one occurrence of its series.
        let mut moved: HashMap<&str, BTreeSet<NaiveDate>> = HashMap::new();
        for event in &events {
            if let (Some(uid), Some(of)) = (&event.uid, event.recurrence_id) {
                moved.entry(uid.as_str()).or_default().insert(of);
            }
        }
        for event in &events {
            let replaced = event.uid.as_deref().and_then(|uid| moved.get(uid)).filter(|_| event.recurrence_id.is_none());
            let starts = event.starts().map_err(|e| error(format!("event {:?}: {e}", event.summary)))?;
            for start in starts {
                if replaced.is_some_and(|r| r.contains(&start)) || event.exdates.contains(&start) {
                    continue;
                }
                for offset in 0..event.days {
                    if let Some(day) = start.checked_add_signed(TimeDelta::days(offset)) {
                        self.close_day(day, &event.summary, event.rrule.is_none());
                    }
                }
                if self.days.len() > MAX_DAYS {
                    return Err(error(format!("more than {MAX_DAYS} closed days (event {:?}): a rule without an end?", event.summary)));
                }
            }
        }
        Ok(())
    }

    /// Why `day` is not a business day here, if it is not.
    pub fn closed(&self, day: NaiveDate) -> Option<Closed> {
        if let Some(name) = self.days.get(&day) {
            return Some(Closed::Holiday { name: name.clone(), calendar: self.name.clone() });
        }
        self.weekend[day.weekday().num_days_from_monday() as usize].then(|| Closed::Weekend(day.weekday()))
    }

    pub fn is_weekend(&self, day: Weekday) -> bool {
        self.weekend[day.num_days_from_monday() as usize]
    }

    pub fn listed_through(&self) -> Option<NaiveDate> {
        self.listed_through
    }

    /// The calendar's version: the first 12 hex digits of the SHA-256 of its weekend and
    /// closed days with their names.
    pub fn version(&self) -> String {
        let mut hash = Sha256::new();
        for (i, closed) in self.weekend.iter().enumerate() {
            hash.update([u8::from(*closed), i as u8]);
        }
        for (day, name) in &self.days {
            hash.update(format!("{day} {name}\n"));
        }
        hex::encode(&hash.finalize()[..6])
    }

    /// The closed days with their names, in order.
    pub fn days(&self) -> impl Iterator<Item = (NaiveDate, &str)> {
        self.days.iter().map(|(d, n)| (*d, n.as_str()))
    }
}

/// Why a day is not a business day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    Weekend(Weekday),
    Holiday { name: String, calendar: String },
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Closed::Weekend(day) => write!(f, "weekend ({day})"),
            Closed::Holiday { name, calendar } => write!(f, "holiday: {name} ({calendar})"),
        }
    }
}

/// `sat,sun`, `fri,sat`, `sun` or `none` (also empty).
pub fn parse_weekend(text: &str) -> Result<Vec<Weekday>, HolidayError> {
    let text = text.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    text.split(',').map(|d| Weekday::from_str(d.trim()).map_err(|_| HolidayError::Weekend(text.to_owned()))).collect()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

fn collect_events<'a>(components: &'a [icalendar::parser::Component<'a>], into: &mut Vec<&'a icalendar::parser::Component<'a>>) {
    for component in components {
        if component.name.as_str().eq_ignore_ascii_case("VEVENT") {
            into.push(component);
        }
        collect_events(&component.components, into);
    }
}

/// An all-day event as it closes days.
struct Event {
    summary: String,
    uid: Option<String>,
    start: NaiveDate,
    /// Days each occurrence lasts (DTEND exclusive, or DURATION).
    days: i64,
    rrule: Option<String>,
    rdates: Vec<NaiveDate>,
    exdates: BTreeSet<NaiveDate>,
    recurrence_id: Option<NaiveDate>,
}

impl Event {
    /// `None` for an event that closes no day (timed, or cancelled).
    fn read(component: &icalendar::parser::Component<'_>) -> Result<Option<Event>, String> {
        let prop = |name: &str| component.find_prop(name).map(|p| p.val.as_str().trim().to_owned());
        let summary = prop("SUMMARY").map(|s| unescape(&s)).unwrap_or_else(|| "holiday".into());
        if prop("STATUS").is_some_and(|s| s.eq_ignore_ascii_case("CANCELLED")) {
            return Ok(None);
        }
        let Some(start) = prop("DTSTART") else { return Err(format!("event {summary:?} has no DTSTART")) };
        let Some(start) = all_day(&start) else { return Ok(None) };
        let days = match (prop("DTEND").as_deref().and_then(all_day), prop("DURATION")) {
            (Some(end), _) => (end - start).num_days().max(1),
            (None, Some(duration)) => {
                duration_days(&duration).ok_or_else(|| format!("event {summary:?}: DURATION {duration:?} is not whole days (P1D, P2W)"))?
            }
            (None, None) => 1,
        };
        let dates = |name: &str| -> Vec<NaiveDate> {
            component
                .properties
                .iter()
                .filter(|p| p.name.as_str().eq_ignore_ascii_case(name))
                .flat_map(|p| p.val.as_str().split(',').filter_map(|v| date_of(v.trim())).collect::<Vec<_>>())
                .collect()
        };
        Ok(Some(Event {
            uid: prop("UID"),
            start,
            days,
            rrule: prop("RRULE"),
            rdates: dates("RDATE"),
            exdates: dates("EXDATE").into_iter().collect(),
            recurrence_id: prop("RECURRENCE-ID").as_deref().and_then(date_of),
            summary,
        }))
    }

    /// The first day of each occurrence, up to [`RECUR_THROUGH_YEAR`].
    fn starts(&self) -> Result<Vec<NaiveDate>, String> {
        let mut starts = vec![self.start];
        starts.extend(&self.rdates);
        let Some(rule) = &self.rrule else { return Ok(starts) };
        // Expanded in UTC at midnight, so the result never depends on the process's zone.
        let text = format!("DTSTART:{}T000000Z\nRRULE:{}", self.start.format("%Y%m%d"), utc_until(rule));
        let set = rrule::RRuleSet::from_str(&text).map_err(|e| format!("RRULE {rule:?}: {e}"))?;
        let through = NaiveDate::from_ymd_opt(RECUR_THROUGH_YEAR, 12, 31)
            .and_then(|d| d.and_hms_opt(23, 59, 59))
            .map(|t| DateTime::<Utc>::from_naive_utc_and_offset(t, Utc));
        let set = match through {
            Some(t) => set.before(t.with_timezone(&rrule::Tz::UTC)),
            None => set,
        };
        let result = set.all(u16::MAX);
        if result.limited && result.dates.len() >= usize::from(u16::MAX) {
            return Err(format!("RRULE {rule:?} has more than {} occurrences before {RECUR_THROUGH_YEAR}", u16::MAX));
        }
        starts.extend(result.dates.iter().map(|d| d.date_naive()));
        Ok(starts)
    }
}

/// A DATE value (`20261003`), or `None` for a DATE-TIME (a timed event).
fn all_day(value: &str) -> Option<NaiveDate> {
    (value.len() == 8).then(|| NaiveDate::parse_from_str(value, "%Y%m%d").ok()).flatten()
}

/// The date of a DATE or DATE-TIME value (EXDATE, RDATE and RECURRENCE-ID may be either).
fn date_of(value: &str) -> Option<NaiveDate> {
    value.get(..8).and_then(|d| NaiveDate::parse_from_str(d, "%Y%m%d").ok())
}

/// `P1D`, `P3D`, `P2W` as days.
fn duration_days(text: &str) -> Option<i64> {
    let body = text.strip_prefix('P')?;
    let (number, unit) = body.split_at(body.len().checked_sub(1)?);
    let n: i64 = number.parse().ok()?;
    match unit {
        "D" => Some(n),
        "W" => Some(n * 7),
        _ => None,
    }
}

/// An `UNTIL` given as a DATE, as UTC to the end of that day (the `rrule` crate wants the
/// same kind of value as DTSTART).
fn utc_until(rule: &str) -> String {
    rule.split(';')
        .map(|part| match part.split_once('=') {
            Some((key, value)) if key.eq_ignore_ascii_case("UNTIL") && value.len() == 8 => format!("UNTIL={value}T235959Z"),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// TEXT values escape `\,` `\;` `\\` and `\n`.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n' | 'N') => out.push(' '),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}
