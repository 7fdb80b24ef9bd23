//! `business`: the business day of the slot a call is for, from the task's schedule as
//! the hosts run it (WIT `almanac:plugin/business`, 0.3.0).
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::bindings::almanac::plugin::business::{BusinessDay, Host};
use crate::task::Applied;

/// The call's slot and the schedule it belongs to; computed only when asked.
#[derive(Default)]
pub struct Today {
    of: Option<(Arc<Applied>, DateTime<Utc>)>,
}

impl Today {
    /// The slot starting at `start` of `applied`'s schedule, when it has calendars.
    pub fn new(applied: Arc<Applied>, start: DateTime<Utc>) -> Today {
        let has = applied.schedule.as_ref().is_some_and(|s| s.business().is_some());
        Today { of: has.then_some((applied, start)) }
    }
}

impl Host for Today {
    async fn today(&mut self) -> wasmtime::Result<Option<BusinessDay>> {
        let Some((applied, start)) = &self.of else { return Ok(None) };
        let Some(schedule) = &applied.schedule else { return Ok(None) };
        let Some(business) = schedule.business() else { return Ok(None) };
        // Only a slot of the schedule has a business day (slot_at of another instant has none).
        let Some(facts) = schedule.slot_at(*start).business else { return Ok(None) };
        Ok(Some(BusinessDay {
            nominal: facts.nominal.to_string(),
            date: facts.date.to_string(),
            day_of_month: facts.business_day_of_month,
            last_of_month: facts.last_business_day_of_month,
            calendars: business.versions(),
        }))
    }
}
