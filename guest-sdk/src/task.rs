use crate::bindings::almanac::plugin::types::{self, DbError};
use crate::bindings::exports::almanac::plugin::task as wit;
use crate::value::Timestamp;

/// A task: what the plugin exports. See the crate docs for a whole plugin.
pub trait Task {
    /// The task's name, schedule and defaults.
    fn describe() -> TaskInfo;

    /// Up to `limit` keys of `slot` after `after`, ascending; an empty page ends the slot.
    ///
    /// The default plans no keys: a task whose jobs are only ever enqueued by identity
    /// (`almanac enqueue`, SQL) rather than generated from its calendar.
    fn plan(slot: &Slot, tx: &crate::Tx, after: Option<&str>, limit: u32) -> Result<Vec<String>, Error> {
        let _ = (slot, tx, after, limit);
        Ok(Vec::new())
    }

    /// Do one job inside `tx`; `Ok` marks it done in the same transaction.
    fn run(job: &Job, tx: &crate::Tx) -> Result<(), Error>;
}

/// Catch-up policy for slots missed while no host ran.
pub type CatchUp = wit::CatchUp;

/// Builder for the WIT `task-info`.
pub struct TaskInfo(wit::TaskInfo);

impl TaskInfo {
    /// A task with the given name, cron expression and IANA zone. Defaults: catch up
    /// all missed slots, 5 attempts, 30 s per call, no tables, no setup SQL, no settings.
    pub fn new(name: &str, schedule: &str, zone: &str) -> Self {
        TaskInfo(wit::TaskInfo {
            name: name.to_owned(),
            version: String::from("0.0.0"),
            schedule: Some(schedule.to_owned()),
            zone: zone.to_owned(),
            catch_up: CatchUp::All,
            max_attempts: 5,
            timeout_ms: 30_000,
            tables: Vec::new(),
            setup: Vec::new(),
            settings: Vec::new(),
            calls: Vec::new(),
            enqueues: Vec::new(),
            reuse: 0,
        })
    }

    /// A task without a schedule: its jobs come only from enqueues (`almanac.enqueue`
    /// in SQL, `almanac enqueue`), each for any instant; `plan` is never called. Slots
    /// are labelled in UTC unless [`TaskInfo::zone`] says otherwise.
    pub fn on_demand(name: &str) -> Self {
        let mut info = TaskInfo::new(name, "", "UTC");
        info.0.schedule = None;
        info
    }

    /// The zone slots are computed (or, on demand, labelled) in.
    pub fn zone(mut self, zone: &str) -> Self {
        self.0.zone = zone.to_owned();
        self
    }

    /// A setting the operator may give (`[tasks.<name>.settings]`), with its default;
    /// read with [`crate::config::get`].
    pub fn setting(mut self, name: &str, default: &str, doc: &str) -> Self {
        self.0.settings.push(wit::Setting { name: name.to_owned(), default: Some(default.to_owned()), doc: doc.to_owned() });
        self
    }

    /// A setting the operator must give: the host does not start the task without it.
    pub fn required_setting(mut self, name: &str, doc: &str) -> Self {
        self.0.settings.push(wit::Setting { name: name.to_owned(), default: None, doc: doc.to_owned() });
        self
    }

    /// The plugin's version (shown in status).
    pub fn version(mut self, version: &str) -> Self {
        self.0.version = version.to_owned();
        self
    }

    /// Policy for missed slots.
    pub fn catch_up(mut self, catch_up: CatchUp) -> Self {
        self.0.catch_up = catch_up;
        self
    }

    /// Attempts before a job is marked failed.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.0.max_attempts = attempts;
        self
    }

    /// Wall-clock limit per call, in milliseconds.
    pub fn timeout_ms(mut self, ms: u32) -> Self {
        self.0.timeout_ms = ms;
        self
    }

    /// Tables the plugin only reads. The plugin's database role gets SELECT on them.
    pub fn reads(self, tables: &[&str]) -> Self {
        self.tables(tables, wit::Access::Read)
    }

    /// Tables the plugin reads and writes. The plugin's database role gets SELECT,
    /// INSERT, UPDATE and DELETE on them; these are also the tables `setup` may create.
    pub fn writes(self, tables: &[&str]) -> Self {
        self.tables(tables, wit::Access::Write)
    }

    fn tables(mut self, tables: &[&str], access: wit::Access) -> Self {
        for name in tables {
            self.0.tables.retain(|t| t.name != *name);
            self.0.tables.push(wit::TableAccess { name: (*name).to_owned(), access });
        }
        self
    }

    /// Functions of the database the plugin's statements call, beyond the host's
    /// allowlist of built-in ones, each with its schema: `.calls(&["public.credit"])`.
    /// A call must be written as declared (`SELECT public.credit($1, $2)`); no other
    /// function of any schema can be called. A declared `SECURITY DEFINER` function runs
    /// with its owner's rights: the plugin then reaches whatever that function reaches.
    pub fn calls(mut self, functions: &[&str]) -> Self {
        for name in functions {
            if !self.0.calls.iter().any(|c| c == name) {
                self.0.calls.push((*name).to_owned());
            }
        }
        self
    }

    /// Let one instance run up to `jobs` jobs of this task in a row, instead of a fresh
    /// instance per job (WIT `task-info.reuse`). What a job leaves in the instance's memory
    /// (a `static`, a cache) is then seen by the next jobs it runs: declare it only when
    /// a job depends on nothing but its arguments and the database. The host starts a
    /// fresh instance after `jobs` jobs, after any job that fails, and when its memory has
    /// grown past half the cap.
    pub fn reuse(mut self, jobs: u32) -> Self {
        self.0.reuse = jobs;
        self
    }

    /// The tasks whose jobs this plugin enqueues with [`Tx::enqueue`](crate::Tx::enqueue):
    /// its role may enqueue into these, and no others (the database refuses the rest).
    pub fn enqueues(mut self, tasks: &[&str]) -> Self {
        for task in tasks {
            if !self.0.enqueues.iter().any(|t| t == task) {
                self.0.enqueues.push((*task).to_owned());
            }
        }
        self
    }

    /// Idempotent DDL for the plugin's own tables, applied by the host at load. Only
    /// CREATE TABLE, CREATE INDEX and ALTER TABLE ... ADD of tables passed to
    /// [`TaskInfo::writes`] are accepted.
    pub fn setup(mut self, statements: &[&str]) -> Self {
        self.0.setup = statements.iter().map(|s| (*s).to_owned()).collect();
        self
    }
}

/// One business period.
#[derive(Debug, Clone)]
pub struct Slot(types::Slot);

impl Slot {
    /// The occurrence that opens the period.
    pub fn start(&self) -> Timestamp {
        Timestamp(self.0.start)
    }
    /// The next occurrence (for an on-demand task: the start itself).
    pub fn end(&self) -> Timestamp {
        Timestamp(self.0.end)
    }
    /// The business period the job is for, named in the business zone as the task's
    /// period unit says: "2026-11-04" (day), "2026-W45" (ISO week), "2026-11" (month),
    /// "2026-Q4", "2026", or for sub-daily schedules the slot's local time and offset
    /// ("2026-11-04T09:30+01:00"). It stays the same when the schedule's time, day or
    /// zone changes; the same as [`Slot::period`].
    pub fn label(&self) -> &str {
        &self.0.label
    }
    /// The business period (see [`Slot::label`]): what to key ledgers and outbox
    /// messages by, so that a schedule change can never make one period two.
    pub fn period(&self) -> &str {
        &self.0.label
    }
    /// The business zone.
    pub fn zone(&self) -> &str {
        &self.0.zone
    }
}

/// One job: its identity `(task, period, key)` plus its attempt number.
#[derive(Debug, Clone)]
pub struct Job {
    /// Task name.
    pub task: String,
    /// Business period.
    pub slot: Slot,
    /// Entity key from `plan`.
    pub key: String,
    /// 1 on the first attempt.
    pub attempt: u32,
    /// Optional JSON payload.
    pub payload: Option<String>,
}

impl Job {
    /// The business period the job is for, e.g. "2026-11" for a monthly task: the
    /// identity to key a ledger row or an outbox message by (see [`Slot::label`]).
    pub fn period(&self) -> &str {
        self.slot.period()
    }
}

/// Why a call failed, and whether to try again.
#[derive(Debug, Clone)]
pub struct Error {
    /// Stored as the job's last error.
    pub message: String,
    /// Retry with backoff (true) or mark failed now (false).
    pub retryable: bool,
}

impl Error {
    /// A failure worth retrying later.
    pub fn retryable(message: impl std::fmt::Display) -> Self {
        Error { message: message.to_string(), retryable: true }
    }

    /// A failure that retrying will not fix.
    pub fn permanent(message: impl std::fmt::Display) -> Self {
        Error { message: message.to_string(), retryable: false }
    }
}

impl From<DbError> for Error {
    fn from(e: DbError) -> Self {
        let message = match &e.sqlstate {
            Some(code) => format!("database error {code}: {}", e.message),
            None => e.message,
        };
        Error { message, retryable: e.retryable }
    }
}

/// The glue [`crate::export_task!`] expands to.
pub mod bridge {
    use super::*;
    use crate::bindings::almanac::plugin::db::Transaction;

    fn to_wit(e: Error) -> wit::TaskError {
        wit::TaskError { message: e.message, retryable: e.retryable }
    }

    /// `describe`, lowered.
    pub fn describe<T: Task>() -> wit::TaskInfo {
        T::describe().0
    }

    /// `plan`, lowered.
    pub fn plan<T: Task>(slot: types::Slot, tx: &Transaction, after: Option<String>, limit: u32) -> Result<Vec<String>, wit::TaskError> {
        T::plan(&Slot(slot), &crate::Tx(tx), after.as_deref(), limit).map_err(to_wit)
    }

    /// `run`, lowered.
    pub fn run<T: Task>(job: types::Job, tx: &Transaction) -> Result<(), wit::TaskError> {
        let job = Job { task: job.task, slot: Slot(job.slot), key: job.key, attempt: job.attempt, payload: job.payload };
        T::run(&job, &crate::Tx(tx)).map_err(to_wit)
    }
}
