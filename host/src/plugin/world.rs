//! The worlds a plugin may be built for. `almanac:plugin@0.5.0` is current; a component
//! built against 0.4.0, 0.3.0, 0.2.0 or 0.1.0 is instantiated through that version's
//! bindings and seen by the rest of the host exactly as a 0.5.0 one that reuses no
//! instance (before 0.4.0, enqueues nothing; before 0.3.0, declares no calls; for 0.1.0,
//! a schedule and no settings). The imports of older versions are the same functions:
//! they delegate to the 0.5.0 capabilities.
use wasmtime::component::{Component, Linker, Resource};
use wasmtime::{Engine, Store};

use super::state::HostState;
use crate::bindings::almanac::plugin::types::{DbError, Job, Rows, Slot, Value};
use crate::bindings::exports::almanac::plugin::task::{Access, CatchUp, TableAccess, TaskError, TaskInfo};
use crate::bindings::{v0_1, v0_2, v0_3, v0_4, TaskPlugin, TaskPluginPre, Transaction, WIT_VERSIONS};
use crate::capability::db::Session;
use crate::capability::log::Logger;

const TASK_V0_1: &str = "almanac:plugin/task@0.1.0";
const TASK_V0_2: &str = "almanac:plugin/task@0.2.0";
const TASK_V0_3: &str = "almanac:plugin/task@0.3.0";
const TASK_V0_4: &str = "almanac:plugin/task@0.4.0";

/// A component ready to instantiate, in the world it was built for.
pub(super) enum Pre {
    V5(TaskPluginPre<HostState>),
    V4(v0_4::TaskPluginPre<HostState>),
    V3(v0_3::TaskPluginPre<HostState>),
    V2(v0_2::TaskPluginPre<HostState>),
    V1(v0_1::TaskPluginPre<HostState>),
}

/// One instance, in the world it was built for.
pub(super) enum Instance {
    V5(TaskPlugin),
    V4(v0_4::TaskPlugin),
    V3(v0_3::TaskPlugin),
    V2(v0_2::TaskPlugin),
    V1(v0_1::TaskPlugin),
}

impl Pre {
    /// Check `component` against the world its `task` export names.
    pub(super) fn new(linker: &Linker<HostState>, engine: &Engine, component: &Component) -> Result<Pre, String> {
        let exported: Vec<String> = component.component_type().exports(engine).map(|(name, _)| name.to_owned()).collect();
        let task = exported.iter().find(|name| name.starts_with("almanac:plugin/task"));
        let checked = linker.instantiate_pre(component).and_then(|pre| match task.map(String::as_str) {
            Some(TASK_V0_1) => v0_1::TaskPluginPre::new(pre).map(Pre::V1),
            Some(TASK_V0_2) => v0_2::TaskPluginPre::new(pre).map(Pre::V2),
            Some(TASK_V0_3) => v0_3::TaskPluginPre::new(pre).map(Pre::V3),
            Some(TASK_V0_4) => v0_4::TaskPluginPre::new(pre).map(Pre::V4),
            _ => TaskPluginPre::new(pre).map(Pre::V5),
        });
        checked.map_err(|e| match task {
            Some(other) if !WIT_VERSIONS.iter().any(|v| other.ends_with(v.trim_start_matches("almanac:plugin"))) => {
                format!("it exports {other}, and this host implements {}: {e:#}", WIT_VERSIONS.join(" and "))
            }
            _ => format!("{e:#}"),
        })
    }

    pub(super) async fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Instance> {
        Ok(match self {
            Pre::V5(pre) => Instance::V5(pre.instantiate_async(store).await?),
            Pre::V4(pre) => Instance::V4(pre.instantiate_async(store).await?),
            Pre::V3(pre) => Instance::V3(pre.instantiate_async(store).await?),
            Pre::V2(pre) => Instance::V2(pre.instantiate_async(store).await?),
            Pre::V1(pre) => Instance::V1(pre.instantiate_async(store).await?),
        })
    }
}

impl Instance {
    pub(super) async fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<TaskInfo> {
        match self {
            Instance::V5(i) => i.almanac_plugin_task().call_describe(store).await,
            Instance::V4(i) => i.almanac_plugin_task().call_describe(store).await.map(task_info_v0_4),
            Instance::V3(i) => i.almanac_plugin_task().call_describe(store).await.map(task_info_v0_3),
            Instance::V2(i) => i.almanac_plugin_task().call_describe(store).await.map(task_info_v0_2),
            Instance::V1(i) => i.almanac_plugin_task().call_describe(store).await.map(task_info),
        }
    }

    pub(super) async fn plan(
        &self,
        store: &mut Store<HostState>,
        slot: &Slot,
        tx: Resource<Transaction>,
        after: Option<&str>,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<String>, TaskError>> {
        match self {
            Instance::V5(i) => i.almanac_plugin_task().call_plan(store, slot, tx, after, limit).await,
            Instance::V4(i) => Ok(i.almanac_plugin_task().call_plan(store, slot, tx, after, limit).await?.map_err(task_error_v0_4)),
            Instance::V3(i) => Ok(i.almanac_plugin_task().call_plan(store, slot, tx, after, limit).await?.map_err(task_error_v0_3)),
            Instance::V2(i) => Ok(i.almanac_plugin_task().call_plan(store, slot, tx, after, limit).await?.map_err(task_error_v0_2)),
            Instance::V1(i) => Ok(i.almanac_plugin_task().call_plan(store, slot, tx, after, limit).await?.map_err(task_error)),
        }
    }

    pub(super) async fn run(&self, store: &mut Store<HostState>, job: &Job, tx: Resource<Transaction>) -> wasmtime::Result<Result<(), TaskError>> {
        match self {
            Instance::V5(i) => i.almanac_plugin_task().call_run(store, job, tx).await,
            Instance::V4(i) => Ok(i.almanac_plugin_task().call_run(store, job, tx).await?.map_err(task_error_v0_4)),
            Instance::V3(i) => Ok(i.almanac_plugin_task().call_run(store, job, tx).await?.map_err(task_error_v0_3)),
            Instance::V2(i) => Ok(i.almanac_plugin_task().call_run(store, job, tx).await?.map_err(task_error_v0_2)),
            Instance::V1(i) => Ok(i.almanac_plugin_task().call_run(store, job, tx).await?.map_err(task_error)),
        }
    }
}

/// A 0.1.0 `task-info`: a scheduled task without settings.
fn task_info(info: v0_1::exports::almanac::plugin::task::TaskInfo) -> TaskInfo {
    use v0_1::exports::almanac::plugin::task as old;
    TaskInfo {
        name: info.name,
        version: info.version,
        schedule: Some(info.schedule),
        zone: info.zone,
        catch_up: match info.catch_up {
            old::CatchUp::All => CatchUp::All,
            old::CatchUp::Latest => CatchUp::Latest,
            old::CatchUp::Window(secs) => CatchUp::Window(secs),
        },
        max_attempts: info.max_attempts,
        timeout_ms: info.timeout_ms,
        tables: info
            .tables
            .into_iter()
            .map(|t| TableAccess {
                name: t.name,
                access: match t.access {
                    old::Access::Read => Access::Read,
                    old::Access::Write => Access::Write,
                },
            })
            .collect(),
        setup: info.setup,
        settings: Vec::new(),
        calls: Vec::new(),
        enqueues: Vec::new(),
        reuse: 0,
    }
}

fn task_error(e: v0_1::exports::almanac::plugin::task::TaskError) -> TaskError {
    TaskError { message: e.message, retryable: e.retryable }
}

/// A 0.2.0 `task-info`: one that declares no calls.
fn task_info_v0_2(info: v0_2::exports::almanac::plugin::task::TaskInfo) -> TaskInfo {
    use crate::bindings::exports::almanac::plugin::task::Setting;
    use v0_2::exports::almanac::plugin::task as old;
    TaskInfo {
        name: info.name,
        version: info.version,
        schedule: info.schedule,
        zone: info.zone,
        catch_up: match info.catch_up {
            old::CatchUp::All => CatchUp::All,
            old::CatchUp::Latest => CatchUp::Latest,
            old::CatchUp::Window(secs) => CatchUp::Window(secs),
        },
        max_attempts: info.max_attempts,
        timeout_ms: info.timeout_ms,
        tables: info
            .tables
            .into_iter()
            .map(|t| TableAccess {
                name: t.name,
                access: match t.access {
                    old::Access::Read => Access::Read,
                    old::Access::Write => Access::Write,
                },
            })
            .collect(),
        setup: info.setup,
        settings: info.settings.into_iter().map(|s| Setting { name: s.name, default: s.default, doc: s.doc }).collect(),
        calls: Vec::new(),
        enqueues: Vec::new(),
        reuse: 0,
    }
}

fn task_error_v0_2(e: v0_2::exports::almanac::plugin::task::TaskError) -> TaskError {
    TaskError { message: e.message, retryable: e.retryable }
}

/// A 0.3.0 `task-info`: one that enqueues nothing.
fn task_info_v0_3(info: v0_3::exports::almanac::plugin::task::TaskInfo) -> TaskInfo {
    use crate::bindings::exports::almanac::plugin::task::Setting;
    use v0_3::exports::almanac::plugin::task as old;
    TaskInfo {
        name: info.name,
        version: info.version,
        schedule: info.schedule,
        zone: info.zone,
        catch_up: match info.catch_up {
            old::CatchUp::All => CatchUp::All,
            old::CatchUp::Latest => CatchUp::Latest,
            old::CatchUp::Window(secs) => CatchUp::Window(secs),
        },
        max_attempts: info.max_attempts,
        timeout_ms: info.timeout_ms,
        tables: info
            .tables
            .into_iter()
            .map(|t| TableAccess {
                name: t.name,
                access: match t.access {
                    old::Access::Read => Access::Read,
                    old::Access::Write => Access::Write,
                },
            })
            .collect(),
        setup: info.setup,
        settings: info.settings.into_iter().map(|s| Setting { name: s.name, default: s.default, doc: s.doc }).collect(),
        calls: info.calls,
        enqueues: Vec::new(),
        reuse: 0,
    }
}

fn task_error_v0_3(e: v0_3::exports::almanac::plugin::task::TaskError) -> TaskError {
    TaskError { message: e.message, retryable: e.retryable }
}

/// A 0.4.0 `task-info`: one that gets a fresh instance for every call.
fn task_info_v0_4(info: v0_4::exports::almanac::plugin::task::TaskInfo) -> TaskInfo {
    use crate::bindings::exports::almanac::plugin::task::Setting;
    use v0_4::exports::almanac::plugin::task as old;
    TaskInfo {
        name: info.name,
        version: info.version,
        schedule: info.schedule,
        zone: info.zone,
        catch_up: match info.catch_up {
            old::CatchUp::All => CatchUp::All,
            old::CatchUp::Latest => CatchUp::Latest,
            old::CatchUp::Window(secs) => CatchUp::Window(secs),
        },
        max_attempts: info.max_attempts,
        timeout_ms: info.timeout_ms,
        tables: info
            .tables
            .into_iter()
            .map(|t| TableAccess {
                name: t.name,
                access: match t.access {
                    old::Access::Read => Access::Read,
                    old::Access::Write => Access::Write,
                },
            })
            .collect(),
        setup: info.setup,
        settings: info.settings.into_iter().map(|s| Setting { name: s.name, default: s.default, doc: s.doc }).collect(),
        calls: info.calls,
        enqueues: info.enqueues,
        reuse: 0,
    }
}

fn task_error_v0_4(e: v0_4::exports::almanac::plugin::task::TaskError) -> TaskError {
    TaskError { message: e.message, retryable: e.retryable }
}

/// Link the 0.1.0, 0.2.0, 0.3.0 and 0.4.0 imports; their `types` are 0.5.0's, an instance
/// with no functions.
pub(super) fn add_older_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    linker.instance("almanac:plugin/types@0.1.0")?;
    v0_1::almanac::plugin::db::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_1::almanac::plugin::outbox::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_1::almanac::plugin::log::add_to_linker::<HostState, HasSelf<Logger>>(linker, |s| &mut s.log)?;
    linker.instance("almanac:plugin/types@0.2.0")?;
    v0_2::almanac::plugin::db::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_2::almanac::plugin::outbox::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_2::almanac::plugin::log::add_to_linker::<HostState, HasSelf<Logger>>(linker, |s| &mut s.log)?;
    v0_2::almanac::plugin::config::add_to_linker::<HostState, HasSelf<crate::capability::config::Settings>>(linker, |s| &mut s.config)?;
    linker.instance("almanac:plugin/types@0.3.0")?;
    v0_3::almanac::plugin::db::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_3::almanac::plugin::outbox::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_3::almanac::plugin::log::add_to_linker::<HostState, HasSelf<Logger>>(linker, |s| &mut s.log)?;
    v0_3::almanac::plugin::config::add_to_linker::<HostState, HasSelf<crate::capability::config::Settings>>(linker, |s| &mut s.config)?;
    v0_3::almanac::plugin::business::add_to_linker::<HostState, HasSelf<crate::capability::business::Today>>(linker, |s| &mut s.today)?;
    linker.instance("almanac:plugin/types@0.4.0")?;
    v0_4::almanac::plugin::db::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_4::almanac::plugin::outbox::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    v0_4::almanac::plugin::log::add_to_linker::<HostState, HasSelf<Logger>>(linker, |s| &mut s.log)?;
    v0_4::almanac::plugin::config::add_to_linker::<HostState, HasSelf<crate::capability::config::Settings>>(linker, |s| &mut s.config)?;
    v0_4::almanac::plugin::business::add_to_linker::<HostState, HasSelf<crate::capability::business::Today>>(linker, |s| &mut s.today)?;
    v0_4::almanac::plugin::jobs::add_to_linker::<HostState, HasSelf<Session>>(linker, |s| &mut s.db)?;
    Ok(())
}

/// An older version's `db`, `outbox` and `log` imports, each the current one's.
macro_rules! delegate {
    ($old:ident) => {
        impl $old::almanac::plugin::db::Host for Session {}

        impl $old::almanac::plugin::db::HostTransaction for Session {
            async fn query(&mut self, tx: Resource<Transaction>, sql: String, params: Vec<Value>) -> wasmtime::Result<Result<Rows, DbError>> {
                crate::bindings::almanac::plugin::db::HostTransaction::query(self, tx, sql, params).await
            }

            async fn execute(&mut self, tx: Resource<Transaction>, sql: String, params: Vec<Value>) -> wasmtime::Result<Result<u64, DbError>> {
                crate::bindings::almanac::plugin::db::HostTransaction::execute(self, tx, sql, params).await
            }

            async fn drop(&mut self, tx: Resource<Transaction>) -> wasmtime::Result<()> {
                crate::bindings::almanac::plugin::db::HostTransaction::drop(self, tx).await
            }
        }

        impl $old::almanac::plugin::outbox::Host for Session {
            async fn publish(
                &mut self,
                tx: Resource<Transaction>,
                topic: String,
                key: String,
                payload: Vec<u8>,
                content_type: String,
            ) -> wasmtime::Result<Result<$old::almanac::plugin::outbox::PublishOutcome, DbError>> {
                use crate::bindings::almanac::plugin::outbox::{Host, PublishOutcome};
                let outcome = Host::publish(self, tx, topic, key, payload, content_type).await?;
                Ok(outcome.map(|o| match o {
                    PublishOutcome::Published => $old::almanac::plugin::outbox::PublishOutcome::Published,
                    PublishOutcome::AlreadyPublished => $old::almanac::plugin::outbox::PublishOutcome::AlreadyPublished,
                }))
            }
        }

        impl $old::almanac::plugin::log::Host for Logger {
            async fn log(&mut self, level: $old::almanac::plugin::log::Level, message: String) -> wasmtime::Result<()> {
                use crate::bindings::almanac::plugin::log::{Host, Level};
                use $old::almanac::plugin::log::Level as Old;
                let level = match level {
                    Old::Trace => Level::Trace,
                    Old::Debug => Level::Debug,
                    Old::Info => Level::Info,
                    Old::Warn => Level::Warn,
                    Old::Error => Level::Error,
                };
                Host::log(self, level, message).await
            }
        }
    };
}

delegate!(v0_1);
delegate!(v0_2);
delegate!(v0_3);
delegate!(v0_4);

impl v0_2::almanac::plugin::config::Host for crate::capability::config::Settings {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        crate::bindings::almanac::plugin::config::Host::get(self, name).await
    }
}

impl v0_3::almanac::plugin::config::Host for crate::capability::config::Settings {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        crate::bindings::almanac::plugin::config::Host::get(self, name).await
    }
}

impl v0_4::almanac::plugin::config::Host for crate::capability::config::Settings {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        crate::bindings::almanac::plugin::config::Host::get(self, name).await
    }
}

impl v0_4::almanac::plugin::jobs::Host for Session {
    async fn enqueue(&mut self, tx: Resource<Transaction>, job: v0_4::almanac::plugin::jobs::NewJob) -> wasmtime::Result<Result<bool, DbError>> {
        let v0_4::almanac::plugin::jobs::NewJob { task, slot, key, payload, run_after } = job;
        let job = crate::bindings::almanac::plugin::jobs::NewJob { task, slot, key, payload, run_after };
        crate::bindings::almanac::plugin::jobs::Host::enqueue(self, tx, job).await
    }
}

impl v0_4::almanac::plugin::business::Host for crate::capability::business::Today {
    async fn today(&mut self) -> wasmtime::Result<Option<v0_4::almanac::plugin::business::BusinessDay>> {
        let day = crate::bindings::almanac::plugin::business::Host::today(self).await?;
        Ok(day.map(|d| v0_4::almanac::plugin::business::BusinessDay {
            nominal: d.nominal,
            date: d.date,
            day_of_month: d.day_of_month,
            last_of_month: d.last_of_month,
            calendars: d.calendars,
        }))
    }
}

impl v0_3::almanac::plugin::business::Host for crate::capability::business::Today {
    async fn today(&mut self) -> wasmtime::Result<Option<v0_3::almanac::plugin::business::BusinessDay>> {
        let day = crate::bindings::almanac::plugin::business::Host::today(self).await?;
        Ok(day.map(|d| v0_3::almanac::plugin::business::BusinessDay {
            nominal: d.nominal,
            date: d.date,
            day_of_month: d.day_of_month,
            last_of_month: d.last_of_month,
            calendars: d.calendars,
        }))
    }
}
