//! What a schedule's business calendar is made from — the calendars' iCalendar text,
//! listed dates and weekends, and the rule — as `almanac.toml` gives it and the
//! database stores it beside the cron (`almanac.schedules.business`). Every host builds
//! the same calendar from the stored source, whatever its own files say, and a change of
//! any of it is a change `almanac apply` makes and records.
use serde::{Deserialize, Serialize};

use super::business::{Business, BusinessError, Roll, Rule};
use super::holidays::{parse_weekend, HolidayError, Holidays};
use super::period::Period;

/// One holiday calendar: `[calendars.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalendarSource {
    pub name: String,
    /// `sat,sun` (the default), `fri,sat`, `none`.
    pub weekend: String,
    /// The iCalendar file's text, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ics: Option<String>,
    /// Days listed by hand (`YYYY-MM-DD`, or `YYYY-MM-DD Name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dates: Vec<String>,
}

/// A schedule's calendars and rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusinessSource {
    pub calendars: Vec<CalendarSource>,
    /// The Nth business day of each `of` (a month by default); else the cron's days,
    /// rolled by `roll` (skip by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_day: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Holidays(#[from] HolidayError),
    #[error(transparent)]
    Business(#[from] BusinessError),
    #[error("{0}")]
    Invalid(String),
}

impl CalendarSource {
    pub fn build(&self) -> Result<Holidays, HolidayError> {
        let mut calendar = Holidays::new(&self.name, &parse_weekend(&self.weekend)?);
        if let Some(ics) = &self.ics {
            calendar.close_ics(ics)?;
        }
        calendar.close_listed(&self.dates)?;
        Ok(calendar)
    }
}

impl BusinessSource {
    pub fn build(&self) -> Result<Business, SourceError> {
        if self.calendars.is_empty() {
            return Err(SourceError::Invalid("a business rule needs at least one calendar".into()));
        }
        let calendars = self.calendars.iter().map(CalendarSource::build).collect::<Result<Vec<_>, _>>()?;
        let of = self.of.as_deref().map(str::parse::<Period>).transpose().map_err(SourceError::Invalid)?;
        let rule = match (self.business_day, &self.roll) {
            (Some(_), Some(_)) => {
                return Err(SourceError::Invalid("give business_day or roll, not both: a business-day rule picks business days and has nothing to roll".into()))
            }
            (Some(n), None) => Rule::Nth { n, of: of.unwrap_or(Period::Month) },
            (None, roll) => Rule::Roll(roll.as_deref().map_or(Ok(Roll::Skip), str::parse)?),
        };
        Ok(Business::new(calendars, rule)?)
    }

    /// [`Business::summary`] of what it builds, or why it cannot be built.
    pub fn summary(&self) -> String {
        self.build().map_or_else(|e| format!("(unreadable: {e})"), |b| b.summary())
    }
}
