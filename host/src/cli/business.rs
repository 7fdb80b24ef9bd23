//! `almanac slots`' business-calendar options: holiday calendars from iCalendar files or
//! listed dates, the weekend, and a roll or business-day rule; and the skipped days it
//! prints. No database: the same slots a host computes, for people and for tests.
use anyhow::Context;
use chrono::NaiveDate;
use serde::Serialize;

use almanac::calendar::business::{check_cron, Skipped};
use almanac::calendar::source::{BusinessSource, CalendarSource};
use almanac::calendar::Schedule;

#[derive(clap::Args, Default)]
pub struct BusinessArgs {
    /// A holiday calendar: an iCalendar file whose all-day events are closed days (RRULE,
    /// RDATE, EXDATE honoured), named after the file (`de-be.ics` is `de-be`). Repeat for
    /// several: a day is a business day when every calendar leaves it open.
    #[arg(long = "calendar", value_name = "FILE.ics")]
    calendars: Vec<std::path::PathBuf>,
    /// Closed days listed by hand (YYYY-MM-DD, comma-separated), a calendar of their own.
    #[arg(long, value_delimiter = ',', value_name = "DATES")]
    holidays: Vec<String>,
    /// The weekdays that are never business days, for every calendar given.
    #[arg(long, default_value = "sat,sun", value_name = "DAYS")]
    weekend: String,
    /// Move a nominal day that is not a business day: following, modified-following,
    /// preceding, modified-preceding, or skip (the default).
    #[arg(long, value_name = "CONVENTION")]
    roll: Option<String>,
    /// The Nth business day of each --period (month unless given): 1 the first, -1 the
    /// last. The cron then gives only the time of day.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    business_day: Option<i32>,
    /// The business period (slot, day, week, month, quarter, year); by default the
    /// schedule's own (a business-day rule's is the month).
    #[arg(long, value_name = "UNIT")]
    pub period: Option<String>,
}

impl BusinessArgs {
    pub fn wanted(&self) -> bool {
        !self.calendars.is_empty() || !self.holidays.is_empty() || self.roll.is_some() || self.business_day.is_some()
    }

    /// `cron` in `zone` with the calendars and rule asked for.
    pub fn schedule(&self, cron: &str, zone: &str) -> anyhow::Result<Schedule> {
        if !self.wanted() {
            return Ok(Schedule::new(cron, zone)?);
        }
        // Before croner, which refuses `LW` with a message about weekdays.
        check_cron(cron)?;
        let schedule = Schedule::new(cron, zone)?;
        let mut calendars = Vec::new();
        for path in &self.calendars {
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "calendar".into());
            let text = std::fs::read_to_string(path).with_context(|| format!("--calendar {}", path.display()))?;
            calendars.push(CalendarSource { name, weekend: self.weekend.clone(), ics: Some(text), dates: Vec::new() });
        }
        if !self.holidays.is_empty() || calendars.is_empty() {
            calendars.push(CalendarSource { name: "listed".into(), weekend: self.weekend.clone(), ics: None, dates: self.holidays.clone() });
        }
        let of = match (self.business_day, &self.period) {
            (Some(_), Some(p)) => Some(p.clone()),
            _ => None,
        };
        let source = BusinessSource { calendars, business_day: self.business_day, of, roll: self.roll.clone() };
        Ok(schedule.with_business(&source)?)
    }
}

#[derive(Serialize)]
struct SkippedLine<'a> {
    skipped: NaiveDate,
    reason: &'a str,
    rolled_to: Option<NaiveDate>,
}

/// The days between `from` and `to` the rule did not use, and why: after the slots, as
/// JSON lines or as a list.
pub fn print_skipped(schedule: &Schedule, from: NaiveDate, to: NaiveDate, json: bool) -> anyhow::Result<()> {
    let Some(business) = schedule.business() else { return Ok(()) };
    let skipped: Vec<Skipped> = business.skipped(schedule, from, to);
    if !json {
        let calendars: Vec<String> = business.calendars().iter().map(|c| format!("{} (version {})", c.name, c.version())).collect();
        println!("calendars: {}", calendars.join(", "));
        if !skipped.is_empty() {
            println!("skipped days:");
        }
    }
    for day in &skipped {
        if json {
            println!("{}", serde_json::to_string(&SkippedLine { skipped: day.date, reason: &day.reason, rolled_to: day.rolled_to })?);
        } else {
            let to = day.rolled_to.map_or_else(|| "no slot".to_owned(), |d| format!("slot on {d}"));
            println!("  {} {:<10} {}: {to}", day.date, day.date.format("%A"), day.reason);
        }
    }
    if let Some(ending) = business.expiring(to).filter(|_| !json) {
        println!("warning: {ending}");
    }
    Ok(())
}
