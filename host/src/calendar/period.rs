//! A task's business period: what one job is *for*. A job's identity is (task, period,
//! key); the instant a slot fires is only when it becomes due. A schedule moved from
//! 09:00 to 10:00, to another day of the month or to another zone keeps naming the same
//! periods, so nothing already done is done again (migration V11 keeps the ledger).
//!
//! Periods are named in the task's zone: `2026-11-04` (day), `2026-W45` (ISO week),
//! `2026-11` (month), `2026-Q4` (quarter), `2026` (year), and for `slot` (every slot its
//! own period, the default of sub-daily schedules) the slot's local time and offset,
//! `2026-11-04T09:30+01:00`. `almanac.period_label` in migration V11 names them the same
//! way for the SQL enqueue API.
use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Slot,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Period {
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Slot => "slot",
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Quarter => "quarter",
            Period::Year => "year",
        }
    }

    /// The period a schedule means when the task declares none, from its cron fields: a
    /// schedule firing more than once a day has `slot`; one naming one day of the month has
    /// `month` (`year` with one month, `quarter` with every third); one naming one weekday
    /// has `week`; any other daily one has `day`. (Mirrored once in migration V11 for the
    /// schedules that existed.)
    pub fn default_for(pattern: &str, once_a_day: bool) -> Period {
        if !once_a_day {
            return Period::Slot;
        }
        let fields: Vec<&str> = pattern.split_whitespace().collect();
        let fields = if fields.len() == 6 { &fields[1..] } else { &fields[..] };
        let [_, _, dom, month, dow] = fields else { return Period::Day };
        let any = |f: &str| f == "*" || f == "?";
        let single = |f: &str| !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric());
        if single(dom) && any(dow) {
            return if any(month) {
                Period::Month
            } else if single(month) {
                Period::Year
            } else if ["*/3", "1-12/3", "1,4,7,10", "2,5,8,11", "3,6,9,12"].contains(month) {
                Period::Quarter
            } else {
                Period::Day
            };
        }
        if any(dom) && single(dow) {
            Period::Week
        } else {
            Period::Day
        }
    }

    /// The name of the period holding business day `day` (not for `slot`, whose periods
    /// are instants).
    pub fn day_label(self, day: NaiveDate) -> String {
        match self {
            Period::Slot | Period::Day => day.format("%Y-%m-%d").to_string(),
            Period::Week => day.format("%G-W%V").to_string(),
            Period::Month => day.format("%Y-%m").to_string(),
            Period::Quarter => format!("{:04}-Q{}", day.year(), day.month0() / 3 + 1),
            Period::Year => day.format("%Y").to_string(),
        }
    }

    /// The first day of the period after the one holding `day` (the next day for `slot`).
    pub fn next_start(self, day: NaiveDate) -> NaiveDate {
        let first_of = |year: i32, month0: u32| NaiveDate::from_ymd_opt(year + (month0 / 12) as i32, month0 % 12 + 1, 1);
        let next = match self {
            Period::Slot | Period::Day => day.succ_opt(),
            Period::Week => day.checked_add_days(chrono::Days::new(7 - u64::from(day.weekday().num_days_from_monday()))),
            Period::Month => first_of(day.year(), day.month0() + 1),
            Period::Quarter => first_of(day.year(), day.month0() / 3 * 3 + 3),
            Period::Year => first_of(day.year() + 1, 0),
        };
        next.unwrap_or(NaiveDate::MAX)
    }

    /// The unit whose periods are named like `label` (`2026-11` is a month's).
    pub fn of_label(label: &str) -> Option<Period> {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        match label.split('-').collect::<Vec<_>>().as_slice() {
            _ if label.contains('T') => Some(Period::Slot),
            [y] if digits(y) => Some(Period::Year),
            [y, q] if digits(y) && q.starts_with('Q') => Some(Period::Quarter),
            [y, w] if digits(y) && w.starts_with('W') => Some(Period::Week),
            [y, m] if digits(y) && digits(m) => Some(Period::Month),
            [y, m, d] if digits(y) && digits(m) && digits(d) => Some(Period::Day),
            _ => None,
        }
    }

    /// Whether `day` is the first day of one of its periods (where a change of unit may
    /// start).
    pub fn starts_on(self, day: NaiveDate) -> bool {
        match self {
            Period::Slot | Period::Day => true,
            Period::Week => day.weekday() == chrono::Weekday::Mon,
            Period::Month => day.day() == 1,
            Period::Quarter => day.day() == 1 && day.month0().is_multiple_of(3),
            Period::Year => day.ordinal() == 1,
        }
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Period {
    type Err = String;

    fn from_str(text: &str) -> Result<Period, String> {
        [Period::Slot, Period::Day, Period::Week, Period::Month, Period::Quarter, Period::Year]
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| format!("period {text:?}: expected slot, day, week, month, quarter or year"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_cron_fields() {
        let cases = [
            ("0 9 1 * *", true, Period::Month),
            ("0 0 9 1 * *", true, Period::Month),
            ("0 9 1 */3 *", true, Period::Quarter),
            ("0 9 1 1,4,7,10 *", true, Period::Quarter),
            ("0 9 15 6 *", true, Period::Year),
            ("0 9 * * MON", true, Period::Week),
            ("0 9 * * 1", true, Period::Week),
            ("0 9 * * 1-5", true, Period::Day),
            ("0 9 * * *", true, Period::Day),
            ("0 9 1,15 * *", true, Period::Day),
            ("*/15 * * * *", false, Period::Slot),
        ];
        for (cron, daily, want) in cases {
            assert_eq!(Period::default_for(cron, daily), want, "{cron}");
        }
    }

    #[test]
    fn labels_name_the_period_of_a_day() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 4).unwrap();
        assert_eq!(Period::Day.day_label(day), "2026-11-04");
        assert_eq!(Period::Week.day_label(day), "2026-W45");
        assert_eq!(Period::Month.day_label(day), "2026-11");
        assert_eq!(Period::Quarter.day_label(day), "2026-Q4");
        assert_eq!(Period::Year.day_label(day), "2026");
        // ISO weeks cross years: 2027-01-01 is a Friday of 2026's week 53.
        assert_eq!(Period::Week.day_label(NaiveDate::from_ymd_opt(2027, 1, 1).unwrap()), "2026-W53");
        assert!(Period::Quarter.starts_on(NaiveDate::from_ymd_opt(2026, 10, 1).unwrap()));
        assert!(!Period::Quarter.starts_on(NaiveDate::from_ymd_opt(2026, 11, 1).unwrap()));
        assert!(Period::Week.starts_on(NaiveDate::from_ymd_opt(2026, 11, 2).unwrap()));
        let next = |p: Period, y, m, d| p.next_start(NaiveDate::from_ymd_opt(y, m, d).unwrap()).to_string();
        assert_eq!(next(Period::Week, 2026, 12, 4), "2026-12-07");
        assert_eq!(next(Period::Week, 2026, 12, 7), "2026-12-14");
        assert_eq!(next(Period::Month, 2026, 12, 4), "2027-01-01");
        assert_eq!(next(Period::Quarter, 2026, 11, 4), "2027-01-01");
        assert_eq!(next(Period::Quarter, 2026, 3, 31), "2026-04-01");
        assert_eq!(next(Period::Year, 2026, 1, 1), "2027-01-01");
        assert_eq!(next(Period::Day, 2026, 12, 31), "2027-01-01");
        for (label, unit) in [
            ("2026", Period::Year),
            ("2026-Q4", Period::Quarter),
            ("2026-W45", Period::Week),
            ("2026-11", Period::Month),
            ("2026-11-04", Period::Day),
            ("2026-11-04T09:30+01:00", Period::Slot),
        ] {
            assert_eq!(Period::of_label(label), Some(unit), "{label}");
        }
        assert_eq!(Period::of_label("run 2026"), None);
    }
}
