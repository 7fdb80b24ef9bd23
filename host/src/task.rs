//! A task as the host runs it: the plugin's `describe()` checked and typed.
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::access::TableGrant;
use crate::bindings::almanac::plugin::types::Slot as WitSlot;
use crate::bindings::exports::almanac::plugin::task::{Access, CatchUp as WitCatchUp, TaskInfo};
use crate::calendar::{Period, Schedule, Slot};

/// Functions one plugin may declare (each is looked up in the catalog at load).
const MAX_CALLS: usize = 256;

/// What to do with slots missed during downtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Generate every missed slot.
    All,
    /// Generate only the newest missed slot; record the others as skipped.
    Latest,
    /// Generate only slots that started within this long before now.
    Window(Duration),
}

impl fmt::Display for CatchUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatchUp::All => f.write_str("all"),
            CatchUp::Latest => f.write_str("latest"),
            CatchUp::Window(d) => write!(f, "window={}", format_duration(*d)),
        }
    }
}

/// One setting a task takes (WIT `setting`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingSpec {
    pub name: String,
    /// None: required.
    pub default: Option<String>,
    pub doc: String,
}

/// A loaded task's identity, schedule and limits.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    pub name: String,
    pub version: String,
    /// None: an on-demand task; its jobs come only from enqueues.
    pub schedule: Option<Schedule>,
    /// The zone its slots are labelled in (the schedule's, or the declared one).
    pub zone: chrono_tz::Tz,
    pub catch_up: CatchUp,
    pub max_attempts: u32,
    pub timeout: Duration,
    /// The tables the plugin declares; its database role may use these and no others.
    pub tables: Vec<TableGrant>,
    pub setup: Vec<String>,
    /// The database role its statements run under: the task's in the database it is
    /// served in (or a dry run's own, [`crate::dryrun`]).
    pub role: String,
    /// The settings it takes.
    pub settings: Vec<SettingSpec>,
    /// The functions and operators it declares it calls (`schema.name`), beyond the
    /// host's allowlist of built-in functions.
    pub calls: Vec<String>,
    /// The tasks whose jobs it enqueues (`jobs.enqueue`): its role may enqueue into these.
    pub enqueues: Vec<String>,
    /// How many jobs one instance may run in a row (WIT `task-info.reuse`; 0 and 1: a
    /// fresh instance for every call).
    pub reuse: u32,
}

impl TaskSpec {
    /// The tables it declares it writes.
    pub fn writable(&self) -> Vec<String> {
        self.tables.iter().filter(|t| t.write).map(|t| t.name.clone()).collect()
    }

    /// Limits for calling `describe()` before the plugin has said anything.
    pub(crate) fn placeholder() -> TaskSpec {
        TaskSpec {
            name: String::new(),
            version: String::new(),
            schedule: None,
            zone: chrono_tz::UTC,
            catch_up: CatchUp::All,
            max_attempts: 1,
            timeout: Duration::from_secs(10),
            tables: Vec::new(),
            setup: Vec::new(),
            role: String::new(),
            settings: Vec::new(),
            calls: Vec::new(),
            enqueues: Vec::new(),
            reuse: 0,
        }
    }

    /// `describe()`'s answer, checked, for a task served in `database`.
    pub(crate) fn from_info(info: TaskInfo, database: &str) -> Result<TaskSpec, String> {
        let name_ok =
            !info.name.is_empty() && info.name.len() <= 64 && info.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !name_ok {
            return Err(format!("task name {:?} is invalid: use 1-64 lowercase letters, digits, '-' and '_'", info.name));
        }
        let schedule = match &info.schedule {
            Some(cron) => Some(Schedule::new(cron, &info.zone).map_err(|e| format!("task {:?}: {e}", info.name))?),
            None => None,
        };
        let zone = info.zone.trim().parse::<chrono_tz::Tz>().map_err(|_| format!("task {:?}: unknown time zone {:?}", info.name, info.zone))?;
        let mut settings: Vec<SettingSpec> = Vec::new();
        for s in info.settings {
            let name_ok =
                !s.name.is_empty() && s.name.len() <= 64 && s.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
            if !name_ok {
                return Err(format!("task {:?}: setting name {:?} is invalid: use 1-64 lowercase letters, digits, '-' and '_'", info.name, s.name));
            }
            if settings.iter().any(|d| d.name == s.name) {
                return Err(format!("task {:?}: setting {:?} is declared twice", info.name, s.name));
            }
            settings.push(SettingSpec { name: s.name, default: s.default, doc: crate::text::clip(s.doc, 200) });
        }
        // Shown in metrics labels, logs, status and the dashboard: printable, short.
        if info.version.is_empty() || info.version.len() > 64 || info.version.chars().any(|c| c.is_control() || c == '"' || c == '\\') {
            return Err(format!(
                "task {:?}: version {:?} is invalid: 1 to 64 printable characters, no quotes or backslashes (e.g. \"1.2.0\")",
                info.name,
                crate::text::clip(info.version.clone(), 80)
            ));
        }
        if info.max_attempts == 0 {
            return Err(format!("task {:?}: max-attempts must be at least 1", info.name));
        }
        if info.timeout_ms == 0 {
            return Err(format!("task {:?}: timeout-ms must be at least 1", info.name));
        }
        let catch_up = match info.catch_up {
            WitCatchUp::All => CatchUp::All,
            WitCatchUp::Latest => CatchUp::Latest,
            WitCatchUp::Window(secs) => CatchUp::Window(Duration::from_secs(secs)),
        };
        let mut tables: Vec<TableGrant> = Vec::new();
        for declared in info.tables {
            crate::access::check_table_name(&declared.name).map_err(|e| format!("task {:?}: {e}", info.name))?;
            let write = matches!(declared.access, Access::Write);
            match tables.iter_mut().find(|t| t.name == declared.name) {
                Some(existing) => existing.write |= write,
                None => tables.push(TableGrant { name: declared.name, write }),
            }
        }
        let mut calls: Vec<String> = Vec::new();
        if info.calls.len() > MAX_CALLS {
            return Err(format!("task {:?}: {} calls declared; the limit is {MAX_CALLS}", info.name, info.calls.len()));
        }
        for call in info.calls {
            crate::access::check_call_name(&call).map_err(|e| format!("task {:?}: {e}", info.name))?;
            if !calls.contains(&call) {
                calls.push(call);
            }
        }
        let mut enqueues: Vec<String> = Vec::new();
        for task in info.enqueues {
            let ok = !task.is_empty() && task.len() <= 64 && task.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
            if !ok {
                return Err(format!("task {:?}: enqueues names task {task:?}, which is no task name", info.name));
            }
            if !enqueues.contains(&task) {
                enqueues.push(task);
            }
        }
        Ok(TaskSpec {
            role: crate::access::role_name(&info.name, database),
            calls,
            enqueues,
            name: info.name,
            version: info.version,
            schedule,
            zone,
            catch_up,
            max_attempts: info.max_attempts,
            timeout: Duration::from_millis(u64::from(info.timeout_ms)),
            tables,
            setup: info.setup,
            settings,
            reuse: info.reuse,
        })
    }
}
impl std::str::FromStr for CatchUp {
    type Err = String;

    /// `all`, `latest` or `window=<duration>` (e.g. `window=3d`).
    fn from_str(text: &str) -> Result<CatchUp, String> {
        match text {
            "all" => Ok(CatchUp::All),
            "latest" => Ok(CatchUp::Latest),
            _ => match text.strip_prefix("window=") {
                Some(d) => humantime::parse_duration(d).map(CatchUp::Window).map_err(|e| format!("catch_up {text:?}: invalid duration: {e}")),
                None => Err(format!("catch_up {text:?}: expected all, latest or window=<duration> (e.g. window=3d)")),
            },
        }
    }
}

impl CatchUp {
    /// Why this policy skips `slot` of `schedule` when it is due at `now`, if it does.
    pub fn skips(self, schedule: &Schedule, slot: &Slot, now: DateTime<Utc>) -> Option<String> {
        match self {
            CatchUp::All => None,
            CatchUp::Latest => {
                let newer_due = schedule.next_after(slot.start).is_some_and(|next| next.start <= now);
                newer_due.then(|| "catch-up latest: a newer slot is due".to_owned())
            }
            CatchUp::Window(window) => {
                let oldest = now - chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
                (slot.start < oldest).then(|| format!("catch-up window={}: older than the window", format_duration(window)))
            }
        }
    }
}

/// The schedule a task runs by: the one stored in the database, the same for every host
/// (see `scheduler::applied`), as this host last saw it. Revision 0: as loaded, not yet
/// compared with the stored one.
#[derive(Debug, Clone)]
pub struct Applied {
    pub revision: i64,
    /// None: on demand.
    pub schedule: Option<Schedule>,
    pub zone: chrono_tz::Tz,
    pub catch_up: CatchUp,
    /// What one job is for: its identity is (task, period, key).
    pub period: Period,
    /// The first local day of `period`'s unit, when an `apply --period-from` changed it:
    /// earlier periods are the old unit's and are not generated again.
    pub period_from: Option<chrono::NaiveDate>,
    /// The unit of the instants before `period_from`.
    pub period_before: Option<Period>,
    /// Every period should have jobs: an empty one is reported (`expect_jobs`).
    pub expect_jobs: bool,
}

impl Applied {
    pub fn declared(spec: &TaskSpec) -> Applied {
        let period = spec.schedule.as_ref().map_or(Period::Slot, Schedule::default_period);
        let expect_jobs = default_expect_jobs(spec);
        Applied {
            revision: 0,
            schedule: spec.schedule.clone(),
            zone: spec.zone,
            catch_up: spec.catch_up,
            period,
            period_from: None,
            period_before: None,
            expect_jobs,
        }
    }

    /// The name of the period a slot starting at `start` is for: in the unit before the
    /// last change of unit if it starts before that change's first day.
    pub fn period_label(&self, start: DateTime<Utc>) -> String {
        let unit = match (self.period_from, self.period_before) {
            (Some(from), Some(before)) if start.with_timezone(&self.zone).date_naive() < from => before,
            _ => self.period,
        };
        match &self.schedule {
            Some(schedule) => schedule.period_label(unit, start),
            None => self.slot_at(start).label,
        }
    }

    /// The slot a job of this task starting at `start` belongs to: its schedule's, or,
    /// on demand, the instant itself (end = start), labelled in the task's zone.
    pub fn slot_at(&self, start: DateTime<Utc>) -> Slot {
        match &self.schedule {
            Some(schedule) => schedule.slot_at(start),
            None => Slot { start, end: start, label: start.with_timezone(&self.zone).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false), business: None },
        }
    }

    /// A slot of this schedule as the plugin sees it (WIT `slot`), labelled with the
    /// period it is for.
    pub fn wit_slot(&self, slot: &Slot, period: &str) -> WitSlot {
        WitSlot { start: slot.start.timestamp_micros(), end: slot.end.timestamp_micros(), label: period.to_owned(), zone: self.zone.name().to_owned() }
    }
}

/// A task expects jobs in every period by default when a business-day rule picks its
/// days: such a period exists to be billed, paid or reported.
pub fn default_expect_jobs(spec: &TaskSpec) -> bool {
    let business = spec.schedule.as_ref().and_then(Schedule::business);
    business.is_some_and(|b| matches!(b.rule(), crate::calendar::business::Rule::Nth { .. }))
}

/// 30 days, or the catch-up window if that is longer.
pub fn default_horizon(catch_up: CatchUp) -> std::time::Duration {
    let month = std::time::Duration::from_secs(30 * 86_400);
    match catch_up {
        CatchUp::Window(window) => window.max(month),
        _ => month,
    }
}

/// A duration as an operator would write it: `3d`, `12h`, `90s`, else humantime's form.
pub fn format_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs == 0 {
        return humantime::format_duration(d).to_string();
    }
    match (secs % 86_400, secs % 3_600, secs % 60) {
        (0, _, _) => format!("{}d", secs / 86_400),
        (_, 0, _) => format!("{}h", secs / 3_600),
        (_, _, 0) => format!("{}m", secs / 60),
        _ => format!("{secs}s"),
    }
}
