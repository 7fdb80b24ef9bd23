//! `almanac.toml`: per-task overrides of what a plugin's `describe()` declares.
//!
//! ```toml
//! [tasks.daily-points]
//! cron = "0 0 * * *"          # default: the plugin's
//! zone = "Asia/Shanghai"      # default: the plugin's
//! catch_up = "window=3d"      # all | latest | window=<duration>; default: the plugin's
//! start_at = "2026-01-01"     # a *new* schedule's first slot, this instant included; default: now
//! paused = false              # default: leave as it is in the database
//! horizon = "90d"             # how far back backfills may reach; default: 30 days, or
//!                             # the catch-up window if that is longer
//! period = "month"            # what one job is for: slot | day | week | month | quarter
//!                             # | year; default: from the cron (crate::calendar::period)
//! max_attempts = 5            # attempts before a job fails for good (1 to 1000);
//!                             # default: the plugin's
//!
//! calendar = "de-be"         # holiday calendars (a name, or a list: the union), below
//! business_day = 1            # the Nth business day of the period (-1 the last); the
//!                             # cron gives the time. Or: roll = "following" |
//!                             # "modified-following" | "preceding" | "modified-preceding"
//!                             # | "skip" (the default) for the cron's own days
//!
//! after = ["usage-rollup"]    # its jobs of a period wait until these tasks' jobs of the
//!                             # same period are done (same period unit; default: none)
//! expect_jobs = true          # every period should have jobs: a plan that returns none
//!                             # is reported (default: true with business_day)
//!
//! [calendars.de-be]           # crate::calendar::source
//! ics = "holidays/de-be.ics"  # all-day events are closed days; relative to this file
//! dates = ["2026-12-24 Heiligabend (Betriebsruhe)"]
//! weekend = "sat,sun"         # the default; "fri,sat", "none"
//!
//! [tasks.daily-points.settings]  # what the plugin declares it takes (see `config.get`)
//! points = "25"
//! api-key = "env:POINTS_API_KEY" # read from the host's environment at start: a secret
//!
//! [outbox.topics.points-awarded]  # where published messages go: see crate::outbox::config
//! sink = "webhook"
//! url = "http://127.0.0.1:8080/hook"
//! ```
//!
//! Unknown keys, unknown tasks, invalid cron lines, unknown zones, settings the plugin
//! does not declare, required settings not given and `env:` variables not set are errors
//! that name the file and line; nothing is silently ignored.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use toml::Spanned;

use crate::calendar::Schedule;
use crate::capability::config::{Setting, Settings};
use crate::task::{CatchUp, TaskSpec};

/// The most attempts a file may give a task: beyond it, a failing job is not retried
/// but stuck in a loop.
const MAX_ATTEMPTS: u32 = 1000;

/// The largest setting value (a file's, or an `env:` variable's).
pub const SETTING_MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read { file: String, source: std::io::Error },
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}:{line}: {message}")]
    Invalid { file: String, line: usize, message: String },
    #[error("{task:?} requires setting {setting:?} ({doc}); give it in [tasks.{task}.settings] of {}", file.as_deref().unwrap_or("almanac.toml (none was given)"))]
    Missing { file: Option<String>, task: String, setting: String, doc: String },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    tasks: BTreeMap<Spanned<String>, TaskOverride>,
    #[serde(default)]
    calendars: BTreeMap<String, CalendarSection>,
    #[serde(default)]
    outbox: crate::outbox::config::Section,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalendarSection {
    ics: Option<Spanned<String>>,
    #[serde(default)]
    dates: Vec<String>,
    weekend: Option<String>,
}

/// `calendar = "de-be"` or `calendar = ["de-be", "us-nyse"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Names {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskOverride {
    cron: Option<Spanned<String>>,
    zone: Option<Spanned<String>>,
    catch_up: Option<Spanned<String>>,
    start_at: Option<Spanned<String>>,
    paused: Option<bool>,
    horizon: Option<Spanned<String>>,
    period: Option<Spanned<String>>,
    max_attempts: Option<Spanned<u32>>,
    calendar: Option<Spanned<Names>>,
    business_day: Option<i32>,
    roll: Option<String>,
    expect_jobs: Option<bool>,
    after: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    settings: BTreeMap<Spanned<String>, Spanned<String>>,
}

/// What the configuration decides for one task beyond its spec.
#[derive(Debug, Clone, Default)]
pub struct TaskSettings {
    /// Where a new schedule's cursor starts (None: now).
    pub start_at: Option<DateTime<Utc>>,
    /// Force the paused flag at start (None: leave it).
    pub paused: Option<bool>,
    /// How far back backfills may reach (None: the default, see [`crate::task::default_horizon`]).
    pub horizon: Option<std::time::Duration>,
    /// The business period one job is for (None: the schedule's default).
    pub period: Option<crate::calendar::Period>,
    /// Every period should have jobs (None: [`crate::task::default_expect_jobs`]).
    pub expect_jobs: Option<bool>,
    /// The tasks whose jobs of a period must be done before this task's jobs of the same
    /// period are claimed (`after = [...]`), sorted.
    pub after: Vec<String>,
    /// Every setting the task declares, with the operator's value or its default.
    pub values: Settings,
}

/// A parsed, not yet applied, configuration file.
#[derive(Debug, Default)]
pub struct Config {
    file: String,
    text: String,
    parsed: File,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { file: file.clone(), source })?;
        Config::parse(&file, text)
    }

    /// The file as named when it was read.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The text it was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn parse(file: &str, text: String) -> Result<Config, ConfigError> {
        let parsed: File =
            toml::from_str(&text).map_err(|e| ConfigError::Parse { file: file.to_owned(), message: e.to_string().trim_end().replace('\n', " ") })?;
        Ok(Config { file: file.to_owned(), text, parsed })
    }

    fn invalid<T>(&self, span: std::ops::Range<usize>, message: String) -> Result<T, ConfigError> {
        let line = self.text[..span.start.min(self.text.len())].matches('\n').count() + 1;
        Err(ConfigError::Invalid { file: self.file.clone(), line, message })
    }

    /// Apply this task's overrides, if any, to a freshly loaded plugin's spec; returns
    /// what the configuration decides for the task beyond its spec.
    /// Without a file: [`Config::none`].
    pub fn apply_to(&self, spec: &mut TaskSpec) -> Result<TaskSettings, ConfigError> {
        let Some((_, o)) = self.parsed.tasks.iter().find(|(name, _)| *name.get_ref() == spec.name) else {
            return Ok(TaskSettings { values: self.settings(spec, None)?, ..TaskSettings::default() });
        };
        *spec = self.override_spec(spec, o)?;
        let values = self.settings(spec, Some(o))?;
        let start_at = match &o.start_at {
            Some(s) => Some(crate::calendar::parse_instant(s.get_ref(), spec.zone).or_else(|e| self.invalid(s.span(), format!("start_at: {e}")))?),
            None => None,
        };
        let horizon = match &o.horizon {
            Some(h) => Some(humantime::parse_duration(h.get_ref()).or_else(|e| self.invalid(h.span(), format!("horizon {:?}: {e}", h.get_ref())))?),
            None => None,
        };
        let period = match &o.period {
            Some(p) if spec.schedule.is_none() => {
                return self.invalid(p.span(), format!("task {:?} runs on demand: its periods are its instants; it takes no period", spec.name));
            }
            Some(p) => Some(p.get_ref().parse().or_else(|e| self.invalid(p.span(), e))?),
            None => None,
        };
        let after = match &o.after {
            Some(a) if spec.schedule.is_none() => {
                return self.invalid(
                    a.span(),
                    format!("task {:?} runs on demand: it has no periods of its own to wait in (after applies to scheduled tasks)", spec.name),
                );
            }
            Some(a) => {
                let mut tasks = a.get_ref().clone();
                if let Some(bad) = tasks.iter().find(|t| **t == spec.name || t.is_empty()) {
                    return self.invalid(a.span(), format!("after: task {bad:?} cannot come after itself (or a task with no name)"));
                }
                tasks.sort();
                tasks.dedup();
                tasks
            }
            None => Vec::new(),
        };
        Ok(TaskSettings { start_at, paused: o.paused, horizon, period, expect_jobs: o.expect_jobs, after, values })
    }

    /// The task's holiday calendars and business rule, on its schedule.
    fn business(&self, spec: &mut TaskSpec, o: &TaskOverride) -> Result<(), ConfigError> {
        let Some(names) = &o.calendar else {
            if o.business_day.is_some() || o.roll.is_some() {
                return self.invalid(0..0, format!("task {:?}: business_day and roll need calendar = \"NAME\" and a [calendars.NAME] section", spec.name));
            }
            return Ok(());
        };
        let Some(schedule) = spec.schedule.take() else {
            return self.invalid(names.span(), format!("task {:?} runs on demand: it has no schedule for a calendar to move", spec.name));
        };
        let names = match names.get_ref() {
            Names::One(name) => vec![name.clone()],
            Names::Many(names) => names.clone(),
        };
        let mut calendars = Vec::new();
        for name in names {
            let Some(section) = self.parsed.calendars.get(&name) else {
                return self.invalid(
                    o.calendar.as_ref().map_or(0..0, Spanned::span),
                    format!("task {:?} names calendar {name:?}, and this file has no [calendars.{name}]", spec.name),
                );
            };
            let ics = match &section.ics {
                Some(path) => {
                    let file = Path::new(&self.file).parent().unwrap_or(Path::new(".")).join(path.get_ref());
                    Some(
                        std::fs::read_to_string(&file)
                            .or_else(|e| self.invalid(path.span(), format!("calendar {name:?}: cannot read {}: {e}", file.display())))?,
                    )
                }
                None => None,
            };
            let weekend = section.weekend.clone().unwrap_or_else(|| "sat,sun".into());
            calendars.push(crate::calendar::source::CalendarSource { name, weekend, ics, dates: section.dates.clone() });
        }
        let source = crate::calendar::source::BusinessSource { calendars, business_day: o.business_day, of: None, roll: o.roll.clone() };
        let span = o.calendar.as_ref().map_or(0..0, Spanned::span);
        // A business_day rule counts in the task's period (a month unless it says).
        let source = match (&o.period, o.business_day) {
            (Some(p), Some(_)) => crate::calendar::source::BusinessSource { of: Some(p.get_ref().clone()), ..source },
            _ => source,
        };
        spec.schedule = Some(schedule.with_business(&source).or_else(|e| self.invalid(span, format!("task {:?}: {e}", spec.name)))?);
        Ok(())
    }

    /// No configuration file: every task as its plugin declares it.
    pub fn none() -> Config {
        Config::default()
    }

    /// The task's settings: each declared one with the file's value (an `env:VAR`
    /// read now, as a secret) or its default; refused when one is undeclared, required
    /// and missing, or reads a variable that is not set.
    fn settings(&self, spec: &TaskSpec, o: Option<&TaskOverride>) -> Result<Settings, ConfigError> {
        let mut values = BTreeMap::new();
        let given = o.map(|o| &o.settings);
        for (name, value) in given.into_iter().flatten() {
            if !spec.settings.iter().any(|d| d.name == *name.get_ref()) {
                let takes: Vec<&str> = spec.settings.iter().map(|d| d.name.as_str()).collect();
                let takes = if takes.is_empty() { "it takes none".to_owned() } else { format!("it takes: {}", takes.join(", ")) };
                return self.invalid(name.span(), format!("task {:?} has no setting {:?} ({takes})", spec.name, name.get_ref()));
            }
            let setting = match value.get_ref().strip_prefix("env:") {
                Some(var) => match std::env::var(var) {
                    Ok(secret) => Setting { value: secret, secret: true },
                    Err(_) => {
                        return self.invalid(value.span(), format!("setting {:?} of task {:?} reads env:{var}, which is not set", name.get_ref(), spec.name));
                    }
                },
                None => Setting { value: value.get_ref().clone(), secret: false },
            };
            // Every `config.get` copies the value into the plugin's memory.
            if setting.value.len() > SETTING_MAX_BYTES {
                let what = if setting.secret { "the variable it reads" } else { "its value" };
                return self.invalid(
                    value.span(),
                    format!("setting {:?} of task {:?}: {what} is {} bytes; the limit is {SETTING_MAX_BYTES}", name.get_ref(), spec.name, setting.value.len()),
                );
            }
            values.insert(name.get_ref().clone(), setting);
        }
        for declared in &spec.settings {
            if values.contains_key(&declared.name) {
                continue;
            }
            match &declared.default {
                Some(default) => {
                    values.insert(declared.name.clone(), Setting { value: default.clone(), secret: false });
                }
                None => {
                    return Err(ConfigError::Missing {
                        file: (!self.file.is_empty()).then(|| self.section_of(&spec.name).unwrap_or_else(|| self.file.clone())),
                        task: spec.name.clone(),
                        setting: declared.name.clone(),
                        doc: declared.doc.clone(),
                    })
                }
            }
        }
        Ok(Settings::new(values))
    }

    /// `file:line` of `task`'s section, if the file has one.
    pub fn section_of(&self, task: &str) -> Option<String> {
        let (name, _) = self.parsed.tasks.iter().find(|(name, _)| name.get_ref() == task)?;
        let line = self.text[..name.span().start.min(self.text.len())].matches('\n').count() + 1;
        Some(format!("{}:{line}", self.file))
    }

    /// Refuse overrides of tasks no plugin provides: likely a typo, never ignored.
    ///
    /// A section for a task this host does not serve is a warning (returned) when
    /// something explains it: another host registered the task, or a plugin file here
    /// failed to load (it may be that task's). A name nothing explains is a typo, and
    /// stops the start.
    pub fn check_tasks(&self, loaded: &[String], registered: &[String], failed: &[String]) -> Result<Vec<String>, ConfigError> {
        let mut warnings = Vec::new();
        for name in self.parsed.tasks.keys() {
            let task = name.get_ref();
            let line = self.text[..name.span().start.min(self.text.len())].matches('\n').count() + 1;
            if loaded.contains(task) {
                continue;
            } else if registered.contains(task) {
                warnings
                    .push(format!("{}:{line}: task {task:?} has no plugin in this host's folder; its section applies on the hosts that serve it", self.file));
            } else if !failed.is_empty() {
                warnings.push(format!("{}:{line}: task {task:?} is not loaded here; plugin files that failed to load: {}", self.file, failed.join("; ")));
            } else {
                return self.invalid(name.span(), format!("unknown task {task:?} (loaded: {}; no host has registered it)", loaded.join(", ")));
            }
        }
        // A topic's reply task or publisher misnamed would fail every reply (or refuse
        // every publish) only when the first message comes: said at start instead.
        for (topic, field, name) in self.parsed.outbox.named_tasks() {
            let task = name.get_ref();
            if loaded.contains(task) || registered.contains(task) {
                continue;
            } else if field == "publishers" {
                // Another host may serve it, not started yet: its publishes are refused
                // with a clear error until then, nothing is lost.
                warnings.push(format!("outbox topic {topic:?}: publishers names task {task:?}, which no host has registered yet"));
            } else if !failed.is_empty() {
                warnings.push(format!(
                    "outbox topic {topic:?}: {field} names task {task:?}, which is not loaded here; plugin files that failed to load: {}",
                    failed.join("; ")
                ));
            } else {
                return self.invalid(
                    name.span(),
                    format!(
                        "outbox topic {topic:?}: {field} names unknown task {task:?} (loaded: {}; no host has registered it; start a host that serves it first, or correct the name)",
                        loaded.join(", ")
                    ),
                );
            }
        }
        Ok(warnings)
    }

    /// The outbox's topics and their sinks (`[outbox.topics.<topic>]`), checked.
    pub fn outbox(&self) -> Result<crate::outbox::Topics, ConfigError> {
        crate::outbox::config::topics(&self.parsed.outbox).or_else(|(span, message)| self.invalid(span, message))
    }

    fn override_spec(&self, spec: &TaskSpec, o: &TaskOverride) -> Result<TaskSpec, ConfigError> {
        let mut spec = spec.clone();
        if spec.schedule.is_none() {
            if let Some(span) = [&o.cron, &o.catch_up, &o.start_at].into_iter().flatten().map(Spanned::span).next() {
                return self.invalid(span, format!("task {:?} runs on demand: it has no schedule to set (only zone, horizon and settings apply)", spec.name));
            }
        }
        if let Some(zone) = &o.zone {
            spec.zone = zone
                .get_ref()
                .trim()
                .parse()
                .or_else(|_| self.invalid(zone.span(), crate::calendar::CalendarError::Zone(zone.get_ref().clone()).to_string()))?;
        }
        if let (Some(schedule), true) = (&spec.schedule, o.cron.is_some() || o.zone.is_some()) {
            let cron = o.cron.as_ref().map_or(schedule.cron().to_owned(), |c| c.get_ref().clone());
            let zone = o.zone.as_ref().map_or(schedule.zone().name().to_owned(), |z| z.get_ref().clone());
            spec.schedule = match Schedule::new(&cron, &zone) {
                Ok(s) => Some(s),
                Err(e) => {
                    let span = match &e {
                        crate::calendar::CalendarError::Zone(_) => o.zone.as_ref().map(Spanned::span),
                        _ => o.cron.as_ref().map(Spanned::span),
                    };
                    return self.invalid(span.unwrap_or(0..0), e.to_string());
                }
            };
        }
        self.business(&mut spec, o)?;
        if let Some(c) = &o.catch_up {
            spec.catch_up = match c.get_ref().parse::<CatchUp>() {
                Ok(c) => c,
                Err(e) => return self.invalid(c.span(), e),
            };
        }
        if let Some(n) = &o.max_attempts {
            if !(1..=MAX_ATTEMPTS).contains(n.get_ref()) {
                return self.invalid(n.span(), format!("max_attempts = {}: between 1 and {MAX_ATTEMPTS}", n.get_ref()));
            }
            spec.max_attempts = *n.get_ref();
        }
        Ok(spec)
    }
}

/// The default configuration path, used only if the file exists.
pub fn default_path() -> PathBuf {
    PathBuf::from("almanac.toml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_errors_with_a_line() {
        let e = Config::parse("almanac.toml", "[tasks.x]\ncron = \"* * * * *\"\ncolour = \"red\"\n".into()).unwrap_err();
        let message = e.to_string();
        assert!(message.starts_with("almanac.toml: TOML parse error at line 3"), "{message}");
        assert!(message.contains("unknown field `colour`"), "{message}");
    }

    #[test]
    fn max_attempts_is_bounded_and_named_by_line() {
        let spec = TaskSpec { name: "x".into(), ..TaskSpec::placeholder() };
        let config = Config::parse("almanac.toml", "[tasks.x]\n\nmax_attempts = 0\n".into()).unwrap();
        let message = config.apply_to(&mut spec.clone()).unwrap_err().to_string();
        assert_eq!(message, "almanac.toml:3: max_attempts = 0: between 1 and 1000");
        let config = Config::parse("almanac.toml", "[tasks.x]\nmax_attempts = 7\n".into()).unwrap();
        let mut applied = spec.clone();
        config.apply_to(&mut applied).unwrap();
        assert_eq!(applied.max_attempts, 7);
    }

    #[test]
    fn a_topic_names_tasks_that_exist() {
        let text = "[outbox.topics.invoices]\nsink = \"log\"\nreply_task = \"record-invoce\"\npublishers = [\"billing\", \"other\"]\n";
        let config = Config::parse("almanac.toml", text.into()).unwrap();
        let loaded = ["billing".to_owned(), "record-invoice".to_owned()];
        let message = config.check_tasks(&loaded, &[], &[]).unwrap_err().to_string();
        assert!(message.starts_with("almanac.toml:3: outbox topic \"invoices\": reply_task names unknown task \"record-invoce\""), "{message}");
        // Registered by another host: fine. A publisher nobody registered yet: a warning.
        let warnings = config.check_tasks(&loaded, &["record-invoce".to_owned()], &[]).unwrap();
        assert_eq!(warnings, ["outbox topic \"invoices\": publishers names task \"other\", which no host has registered yet"]);
        // A plugin file that failed to load may be the reply task's: a warning.
        let warnings = config.check_tasks(&loaded, &["other".to_owned()], &["x.wasm: broken".to_owned()]).unwrap();
        assert!(warnings[0].contains("reply_task names task \"record-invoce\", which is not loaded here"), "{warnings:?}");
    }

    #[test]
    fn catch_up_parses() {
        assert_eq!("window=3d".parse(), Ok(CatchUp::Window(std::time::Duration::from_secs(3 * 86400))));
        assert!("sometimes".parse::<CatchUp>().unwrap_err().contains("expected all, latest or window="));
    }
}
