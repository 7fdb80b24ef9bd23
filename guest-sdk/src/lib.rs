//! Write [Almanac](https://example.invalid/almanac) task plugins in Rust.
//!
//! A plugin is a `cdylib` crate built for `wasm32-wasip2`. It implements [`Task`] and
//! exports it with [`export_task!`]; the host does everything else: the calendar, the
//! claiming, the transaction, retries and recovery. Everything a plugin does to the
//! database goes through the [`Tx`] it is lent, so its writes commit exactly when its
//! job is marked done. A plugin never calls out: it publishes outbox messages in the
//! same transaction ([`Tx::publish`]) and the host delivers them, at least once.
//!
//! ```no_run
//! use almanac_guest::{export_task, Error, Job, Slot, Task, TaskInfo, Tx};
//!
//! /// Gives every account 10 points once per day. Eligible: accounts that exist when
//! /// the slot is planned.
//! struct DailyPoints;
//!
//! impl Task for DailyPoints {
//!     fn describe() -> TaskInfo {
//!         // Everything the plugin's SQL touches is declared: it runs under its own
//!         // database role, which may use these tables and nothing else.
//!         TaskInfo::new("daily-points", "0 0 * * *", "Asia/Shanghai")
//!             .writes(&["accounts", "points_ledger"])
//!             .setup(&["CREATE TABLE IF NOT EXISTS points_ledger (
//!                  task text, slot timestamptz, account_id bigint, points bigint NOT NULL,
//!                  PRIMARY KEY (task, slot, account_id))"])
//!     }
//!
//!     fn plan(_slot: &Slot, tx: &Tx, after: Option<&str>, limit: u32) -> Result<Vec<String>, Error> {
//!         let after: i64 = after.map(str::parse).transpose().map_err(Error::permanent)?.unwrap_or(i64::MIN);
//!         let rows = tx.query(
//!             "SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2",
//!             &[&after, &i64::from(limit)],
//!         )?;
//!         rows.iter().map(|r| Ok(r.get::<i64>(0)?.to_string())).collect()
//!     }
//!
//!     fn run(job: &Job, tx: &Tx) -> Result<(), Error> {
//!         let account: i64 = job.key.parse().map_err(Error::permanent)?;
//!         let new = tx.execute(
//!             "INSERT INTO points_ledger VALUES ($1, $2, $3, 10) ON CONFLICT DO NOTHING",
//!             &[&job.task, &job.slot.start(), &account],
//!         )?;
//!         if new == 1 {
//!             tx.execute("UPDATE accounts SET points = points + 10 WHERE id = $1", &[&account])?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! export_task!(DailyPoints);
//! ```
#![deny(missing_docs)]

mod outbox;
mod task;
mod tx;
mod value;

pub use outbox::{NewJob, PublishOutcome};
pub use task::{CatchUp, Error, Job, Slot, Task, TaskInfo};
pub use tx::{Row, Rows, Tx};
pub use value::{FromValue, Timestamp, ToValue, Value};

/// The business day of the slot the current `plan` or `run` is for, when the task runs by
/// holiday calendars (`calendar` in `almanac.toml`).
pub mod business {
    pub use crate::bindings::almanac::plugin::business::BusinessDay;

    /// The current slot's business day: the day it is for (`nominal`, before any roll),
    /// the business day it runs on (`date`), its place among the month's business days
    /// (`day_of_month`, from 1), whether it is the month's last (`last_of_month`), and the
    /// calendars (`name@version`). `None` for a task without holiday calendars.
    pub fn today() -> Option<BusinessDay> {
        crate::bindings::almanac::plugin::business::today()
    }
}

/// The operator's settings for this task, as declared with [`TaskInfo::setting`] and
/// [`TaskInfo::required_setting`] (`[tasks.<name>.settings]` in `almanac.toml`).
pub mod config {
    /// The setting's value: the operator's, else its default; `None` for a name the
    /// task did not declare.
    pub fn get(name: &str) -> Option<String> {
        crate::bindings::almanac::plugin::config::get(name)
    }

    /// The setting parsed as `T`; a value that does not parse is a permanent error
    /// naming the setting.
    pub fn parse<T: std::str::FromStr>(name: &str) -> Result<T, crate::Error>
    where
        T::Err: std::fmt::Display,
    {
        let value = get(name).ok_or_else(|| crate::Error::permanent(format!("setting {name:?} is not declared")))?;
        value.parse().map_err(|e| crate::Error::permanent(format!("setting {name:?} = {value:?}: {e}")))
    }
}

/// Leveled logging into the host's log, under the plugin's name and the job's fields.
pub mod log {
    use crate::bindings::almanac::plugin::log::{log, Level};

    /// Log at error level.
    pub fn error(message: impl AsRef<str>) {
        log(Level::Error, message.as_ref())
    }
    /// Log at warn level.
    pub fn warn(message: impl AsRef<str>) {
        log(Level::Warn, message.as_ref())
    }
    /// Log at info level.
    pub fn info(message: impl AsRef<str>) {
        log(Level::Info, message.as_ref())
    }
    /// Log at debug level.
    pub fn debug(message: impl AsRef<str>) {
        log(Level::Debug, message.as_ref())
    }
}

/// The raw WIT bindings, for what the ergonomic layer does not cover.
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "task-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "::almanac_guest::bindings",
    });
}

#[doc(hidden)]
pub mod __private {
    pub use crate::task::bridge;
}

/// Export a type implementing [`Task`] as this component's task.
///
/// Use it once per plugin crate, at the crate root.
#[macro_export]
macro_rules! export_task {
    ($task:ty) => {
        const _: () = {
            struct __AlmanacTask;
            impl $crate::bindings::exports::almanac::plugin::task::Guest for __AlmanacTask {
                fn describe() -> $crate::bindings::exports::almanac::plugin::task::TaskInfo {
                    $crate::__private::bridge::describe::<$task>()
                }
                fn plan(
                    slot: $crate::bindings::almanac::plugin::types::Slot,
                    tx: &$crate::bindings::almanac::plugin::db::Transaction,
                    after_key: Option<String>,
                    limit: u32,
                ) -> Result<Vec<String>, $crate::bindings::exports::almanac::plugin::task::TaskError> {
                    $crate::__private::bridge::plan::<$task>(slot, tx, after_key, limit)
                }
                fn run(
                    job: $crate::bindings::almanac::plugin::types::Job,
                    tx: &$crate::bindings::almanac::plugin::db::Transaction,
                ) -> Result<(), $crate::bindings::exports::almanac::plugin::task::TaskError> {
                    $crate::__private::bridge::run::<$task>(job, tx)
                }
            }
    $crate::bindings::__export_world!(__AlmanacTask with_types_in $crate::bindings);
        };
    };
}
