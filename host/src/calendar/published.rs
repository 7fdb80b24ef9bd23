//! The calendar as the database checks it. `almanac.enqueue` (SQL, no Rust at hand) must
//! refuse a slot that is not on a task's calendar; matching cron in PL/pgSQL would be a
//! second implementation that drifts. Instead a host publishes, with each schedule, what
//! croner itself says: the seconds, minutes and hours that match, and the local days that
//! match within a window around now (day-of-month, weekday, `L`, `W`, `#` and their
//! combination resolved here). The SQL check is set membership of the slot's wall time.
use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Utc};
use serde::Serialize;

use super::{local_naive, Schedule};

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
        let days = from
            .iter_days()
            .take_while(|d| *d <= to)
            .filter(|d| pattern.month_match(d.month()).unwrap_or(false) && pattern.day_match(d.year(), d.month(), d.day()).unwrap_or(false))
            .collect();
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
