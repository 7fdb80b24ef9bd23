//! Business days: which days a schedule's slots fall on once holiday calendars close
//! some, and the two kinds of rule a schedule may add to its cron.
//!
//! - **Roll** (`roll = "following"` …): the cron names nominal days; a nominal day that
//!   is not a business day moves to one by the convention, at the cron's time of day, or
//!   is skipped (`skip`, the default). The slot stays the nominal day's: its period is the
//!   nominal day's (the 25th rolled to the 24th is still that month's; a following roll
//!   from 31 May to 1 June is still May's).
//! - **Nth business day** (`business_day = 3`, `-1` the last) of each month, quarter or
//!   year, at the cron's one time of day.
//!
//! With several calendars a day is a business day only when every one of them leaves it
//! open (the union of their closed days and weekends). A roll searches at most
//! [`MAX_ROLL_DAYS`] days; a day with no business day that near is skipped.
//!
//! The arithmetic is small and ours; `tests/calendars/oracle.py` computes the same slots
//! with numpy's `busday_offset` and dateutil's rrule, and a test compares the two over
//! ten years.
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::str::FromStr;

use chrono::{DateTime, Datelike, Months, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc, Weekday};
use serde::Serialize;

use super::holidays::{Closed, Holidays};
use super::period::Period;

/// How far a roll looks for a business day.
pub const MAX_ROLL_DAYS: i64 = 31;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roll {
    Following,
    ModifiedFollowing,
    Preceding,
    ModifiedPreceding,
    Skip,
}

impl Roll {
    pub fn as_str(self) -> &'static str {
        match self {
            Roll::Following => "following",
            Roll::ModifiedFollowing => "modified-following",
            Roll::Preceding => "preceding",
            Roll::ModifiedPreceding => "modified-preceding",
            Roll::Skip => "skip",
        }
    }
}

impl FromStr for Roll {
    type Err = BusinessError;

    fn from_str(text: &str) -> Result<Roll, BusinessError> {
        let all = [Roll::Following, Roll::ModifiedFollowing, Roll::Preceding, Roll::ModifiedPreceding, Roll::Skip];
        all.into_iter().find(|r| r.as_str() == text.trim()).ok_or_else(|| BusinessError::Roll(text.to_owned()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// The cron's days, a closed one rolled.
    Roll(Roll),
    /// The nth business day (from 1; -1 is the last) of each month, quarter or year.
    Nth { n: i32, of: Period },
}

#[derive(Debug, thiserror::Error)]
pub enum BusinessError {
    #[error("roll {0:?}: expected following, modified-following, preceding, modified-preceding or skip")]
    Roll(String),
    #[error("business_day = {n} of a {of}: {why}")]
    Nth { n: i32, of: &'static str, why: &'static str },
    #[error("calendar {0:?} has every day of the week in its weekend: no day would ever be a business day")]
    AlwaysClosed(String),
    #[error("{0}")]
    Cron(String),
}

/// The calendars a schedule runs by and its rule.
#[derive(Debug, Clone)]
pub struct Business {
    calendars: Vec<Holidays>,
    rule: Rule,
}

/// What a slot's plugin may know of its business day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// The day the slot is for: the cron's day, before any roll.
    pub nominal: NaiveDate,
    /// The business day it runs on.
    pub date: NaiveDate,
    /// Its place among the month's business days, from 1.
    pub business_day_of_month: u32,
    pub last_business_day_of_month: bool,
}

/// A day a schedule would have used and did not, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub date: NaiveDate,
    pub reason: String,
    /// Where its slot went instead, if anywhere.
    pub rolled_to: Option<NaiveDate>,
}

impl Business {
    pub fn new(calendars: Vec<Holidays>, rule: Rule) -> Result<Business, BusinessError> {
        if let Rule::Nth { n, of } = rule {
            let most = match of {
                Period::Month => 23,
                Period::Quarter => 66,
                Period::Year => 262,
                _ => return Err(BusinessError::Nth { n, of: of.as_str(), why: "business days count in a month, quarter or year" }),
            };
            if n == 0 || n.unsigned_abs() > most {
                return Err(BusinessError::Nth { n, of: of.as_str(), why: "give 1 for the first, -1 for the last, within the days such a period has" });
            }
        }
        let weekdays = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri, Weekday::Sat, Weekday::Sun];
        if weekdays.iter().all(|d| calendars.iter().any(|c| c.is_weekend(*d))) {
            let names: Vec<&str> = calendars.iter().map(|c| c.name.as_str()).collect();
            return Err(BusinessError::AlwaysClosed(names.join("+")));
        }
        Ok(Business { calendars, rule })
    }

    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    pub fn calendars(&self) -> &[Holidays] {
        &self.calendars
    }

    /// Each calendar as `name@version`.
    pub fn versions(&self) -> Vec<String> {
        self.calendars.iter().map(|c| format!("{}@{}", c.name, c.version())).collect()
    }

    /// One line: `de-be@f54633603b7d, business_day = 1 of month`.
    pub fn summary(&self) -> String {
        let rule = match self.rule {
            Rule::Nth { n, of } => format!("business_day = {n} of {}", of.as_str()),
            Rule::Roll(roll) => format!("roll = {}", roll.as_str()),
        };
        format!("{}, {rule}", self.versions().join(" + "))
    }

    /// The calendars whose dated holidays end before `by`, as a warning: a calendar of
    /// movable feasts nobody extended at year end would silently make every later year
    /// holiday-free.
    pub fn expiring(&self, by: NaiveDate) -> Option<String> {
        let ending: Vec<String> = self
            .calendars
            .iter()
            .filter_map(|c| c.listed_through().filter(|t| *t < by).map(|t| format!("{} lists dated holidays only through {t}", c.name)))
            .collect();
        (!ending.is_empty()).then(|| format!("{}: extend it and `almanac apply`", ending.join("; ")))
    }

    /// Why `day` is not a business day: a holiday of any calendar first, then a weekend.
    pub fn closed(&self, day: NaiveDate) -> Option<Closed> {
        let all: Vec<Closed> = self.calendars.iter().filter_map(|c| c.closed(day)).collect();
        all.iter().find(|c| matches!(c, Closed::Holiday { .. })).or(all.first()).cloned()
    }

    pub fn is_open(&self, day: NaiveDate) -> bool {
        self.calendars.iter().all(|c| c.closed(day).is_none())
    }

    /// The business day `day` rolls to (itself when open); `None` for `skip`, or with no
    /// business day within [`MAX_ROLL_DAYS`].
    pub fn roll(&self, day: NaiveDate, roll: Roll) -> Option<NaiveDate> {
        if self.is_open(day) {
            return Some(day);
        }
        let same_month = |d: &NaiveDate| d.month() == day.month() && d.year() == day.year();
        match roll {
            Roll::Skip => None,
            Roll::Following => self.step(day, 1),
            Roll::Preceding => self.step(day, -1),
            Roll::ModifiedFollowing => self.step(day, 1).filter(same_month).or_else(|| self.step(day, -1)),
            Roll::ModifiedPreceding => self.step(day, -1).filter(same_month).or_else(|| self.step(day, 1)),
        }
    }

    fn step(&self, day: NaiveDate, by: i64) -> Option<NaiveDate> {
        (1..=MAX_ROLL_DAYS).filter_map(|i| day.checked_add_signed(TimeDelta::days(by * i))).find(|d| self.is_open(*d))
    }

    /// The `n`th business day of the `of` period holding `day` (-1 the last).
    pub fn nth(&self, n: i32, of: Period, day: NaiveDate) -> Option<NaiveDate> {
        let (first, last) = bounds(of, day)?;
        let mut days = first.iter_days().take_while(|d| *d <= last).filter(|d| self.is_open(*d));
        if n > 0 {
            days.nth(n as usize - 1)
        } else {
            let open: Vec<NaiveDate> = days.collect();
            open.len().checked_sub(n.unsigned_abs() as usize).map(|i| open[i])
        }
    }

    pub fn facts(&self, nominal: NaiveDate, date: NaiveDate) -> Facts {
        let first = date.with_day(1).unwrap_or(date);
        let index = first.iter_days().take_while(|d| *d <= date).filter(|d| self.is_open(*d)).count();
        Facts {
            nominal,
            date,
            business_day_of_month: u32::try_from(index).unwrap_or(u32::MAX),
            last_business_day_of_month: self.nth(-1, Period::Month, date) == Some(date),
        }
    }

    /// Where the slot of the nominal occurrence `at` of `schedule` runs; `rolled` orders
    /// a day's own occurrence first.
    fn place(&self, schedule: &impl Cron, at: DateTime<Utc>) -> Option<Placed> {
        let day = schedule.day_of(at)?;
        match self.rule {
            Rule::Nth { n, of } => (self.nth(n, of, day) == Some(day)).then_some((at, false, day, day)),
            Rule::Roll(roll) => {
                let date = self.roll(day, roll)?;
                if date == day {
                    return Some((at, false, day, day));
                }
                let start = schedule.resolve_wall(date.and_time(schedule.wall_time_on(day)?))?;
                Some((start, true, day, date))
            }
        }
    }

    /// The days `schedule` would have used between `from` and `to` (inclusive) that this
    /// rule did not, and why.
    pub fn skipped(&self, schedule: &impl Cron, from: NaiveDate, to: NaiveDate) -> Vec<Skipped> {
        let mut out = Vec::new();
        let mut short = BTreeSet::new();
        for day in from.iter_days().take_while(|d| *d <= to) {
            match self.rule {
                Rule::Roll(roll) => {
                    let Some(closed) = self.closed(day).filter(|_| schedule.wall_time_on(day).is_some()) else { continue };
                    let rolled_to = self.roll(day, roll);
                    let mut reason = closed.to_string();
                    if roll != Roll::Skip && rolled_to.is_none() {
                        reason.push_str(&format!("; no business day within {MAX_ROLL_DAYS} days"));
                    } else if rolled_to.is_some_and(|d| schedule.wall_time_on(d).is_some()) {
                        reason.push_str("; rolled onto a day the schedule runs on already: one slot");
                    }
                    out.push(Skipped { date: day, reason, rolled_to });
                }
                Rule::Nth { n, of } => match self.nth(n, of, day) {
                    Some(chosen) => {
                        if let Some(closed) = self.closed(day).filter(|_| if n > 0 { day < chosen } else { day > chosen }) {
                            out.push(Skipped { date: day, reason: closed.to_string(), rolled_to: Some(chosen) });
                        }
                    }
                    None => {
                        if short.insert(of.day_label(day)) {
                            let reason = format!("the {} {} has fewer than {} business days", of.as_str(), of.day_label(day), n.unsigned_abs());
                            out.push(Skipped { date: day, reason, rolled_to: None });
                        }
                    }
                },
            }
        }
        out
    }
}

/// Cron's `L`, `W` and `#` days (`LW`, `15W`, `5L`, `1#2`) are the calendar's, not the
/// business days': with holiday calendars they are refused, naming the rule to use.
pub fn check_cron(expr: &str) -> Result<(), BusinessError> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let days = fields.get(fields.len().saturating_sub(3)..).unwrap_or_default();
    if let [dom, _, dow] = days {
        if dom.to_ascii_uppercase().contains(['L', 'W']) || dow.to_ascii_uppercase().contains(['L', '#']) {
            return Err(BusinessError::Cron(format!(
                "cron {expr:?}: with a holiday calendar, its L, W and # days do not know the holidays; \
                 use business_day = 1 (first business day), -1 (last) or N, or roll = \"preceding\" on a day of the month"
            )));
        }
    }
    Ok(())
}

/// The first and last day of the `of` period holding `day`.
fn bounds(of: Period, day: NaiveDate) -> Option<(NaiveDate, NaiveDate)> {
    let first = match of {
        Period::Month => day.with_day(1)?,
        Period::Quarter => NaiveDate::from_ymd_opt(day.year(), day.month0() / 3 * 3 + 1, 1)?,
        Period::Year => NaiveDate::from_ymd_opt(day.year(), 1, 1)?,
        _ => return Some((day, day)),
    };
    let months = match of {
        Period::Month => 1,
        Period::Quarter => 3,
        _ => 12,
    };
    Some((first, first.checked_add_months(Months::new(months))?.pred_opt()?))
}

/// What the rules need of a cron schedule in a zone ([`crate::calendar::Schedule`]).
pub trait Cron {
    /// The local day the occurrence at `at` belongs to.
    fn day_of(&self, at: DateTime<Utc>) -> Option<NaiveDate>;
    /// The wall time the cron matches on local `day`, if it fires that day.
    fn wall_time_on(&self, day: NaiveDate) -> Option<NaiveTime>;
    /// The instant a slot at wall time `naive` starts at.
    fn resolve_wall(&self, naive: NaiveDateTime) -> Option<DateTime<Utc>>;
}

/// A slot placed on its business day: `(start, rolled, nominal day, business day)`.
pub type Placed = (DateTime<Utc>, bool, NaiveDate, NaiveDate);

/// How far before `after` nominal occurrences must be read: a following roll brings them
/// up to [`MAX_ROLL_DAYS`] later.
pub const LOOK_BACK: TimeDelta = TimeDelta::days(MAX_ROLL_DAYS + 2);

/// The slots of `nominal` (the cron's occurrences from [`LOOK_BACK`] before `after`, in
/// order) placed by `business`'s rule, after `after`, in order. A placed slot is given out
/// once no later nominal occurrence can be placed before it. Two slots at one instant are
/// one (a day's own occurrence wins).
pub fn placed_after<'a>(
    cron: &'a impl Cron,
    business: &'a Business,
    mut nominal: impl Iterator<Item = DateTime<Utc>> + 'a,
    after: DateTime<Utc>,
) -> impl Iterator<Item = Placed> + 'a {
    let mut heap: BinaryHeap<Reverse<Placed>> = BinaryHeap::new();
    let mut pulled: Option<DateTime<Utc>> = None;
    let mut exhausted = false;
    let mut last: Option<DateTime<Utc>> = None;
    std::iter::from_fn(move || loop {
        if let Some(&Reverse(next)) = heap.peek() {
            if exhausted || pulled.is_some_and(|p| p - LOOK_BACK > next.0) {
                heap.pop();
                if next.0 <= after || last == Some(next.0) {
                    continue;
                }
                last = Some(next.0);
                return Some(next);
            }
        }
        if exhausted {
            return None;
        }
        match nominal.next() {
            Some(at) => {
                pulled = Some(at);
                heap.extend(business.place(cron, at).map(Reverse));
            }
            None => exhausted = true,
        }
    })
}
