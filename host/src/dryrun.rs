//! A dry run: one plugin's `run` (for one job) or `plan` (for one slot) against the
//! configured database, in a single transaction that is rolled back unless the caller
//! asks to commit, in a session of the plugin's own login (as a host runs it). The
//! plugin's setup runs inside that same transaction, so a rolled-back dry run leaves no
//! row and no table behind; what it cannot roll back: the plugin's role (a login, made
//! and granted as a deploy would make it: roles are cluster-wide, and a session logs in
//! only as a committed one) and sequences the plugin advanced (`nextval` is never rolled
//! back). Every statement the plugin sent is kept, with its parameters and what it did.
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::Pool;
use anyhow::bail;
use chrono::{DateTime, Utc};

use crate::bindings::almanac::plugin::types::Job;
use crate::capability::db::Trace;
use crate::config::Config;
use crate::login::Logins;
use crate::plugin::{Plugin, Runtime};

/// What a dry run did.
pub struct Tried {
    /// Every statement the call sent (the first [`crate::capability::db::TRACE_KEPT`]).
    pub trace: Trace,
    /// `Ok` with what the call returned (for `plan`, its keys), or the job's error.
    pub outcome: Result<Vec<String>, String>,
    pub elapsed: Duration,
    pub committed: bool,
}

/// Load the plugin of `task` from `plugins` (a folder of components, or one component
/// file), adjusted by `config` (its settings too).
pub async fn load(runtime: &Arc<Runtime>, plugins: &Path, config: Option<&Path>, task: &str) -> anyhow::Result<Plugin> {
    let config = config.map(Config::load).transpose()?.unwrap_or_else(Config::none);
    if !plugins.exists() {
        bail!("{} does not exist: give --plugins a folder of components or one .wasm file", plugins.display());
    }
    let files = match plugins.is_file() {
        true => vec![plugins.to_owned()],
        false => crate::catalog::wasm_files(plugins)?,
    };
    let mut seen = Vec::new();
    for path in files {
        let mut plugin = match runtime.load(&path).await {
            Ok(plugin) => plugin,
            Err(e) => {
                tracing::warn!("{e}");
                continue;
            }
        };
        if plugin.name() != task {
            seen.push(plugin.name().to_owned());
            continue;
        }
        let settings = config.apply_to(&mut plugin.spec)?;
        plugin.set_settings(settings.values);
        // The file's schedule and period name the slots and periods tried.
        let mut applied = crate::task::Applied::declared(&plugin.spec);
        applied.period = settings.period.unwrap_or(applied.period);
        plugin.follow(applied);
        return Ok(plugin);
    }
    bail!("no plugin in {} provides task {task:?} (found: {})", plugins.display(), if seen.is_empty() { "none".into() } else { seen.join(", ") })
}

/// `run` of one job `(task, slot, key)`.
pub async fn run(
    (pool, logins): (&Pool, &Logins),
    runtime: &Runtime,
    plugin: &Plugin,
    slot: DateTime<Utc>,
    key: &str,
    payload: Option<String>,
    commit: bool,
) -> anyhow::Result<Tried> {
    let applied = plugin.applied();
    let job = Job {
        task: plugin.name().to_owned(),
        slot: applied.wit_slot(&applied.slot_at(slot), &applied.period_label(slot)),
        key: key.to_owned(),
        attempt: 1,
        payload,
    };
    within((pool, logins), runtime, plugin, commit, |conn| async move {
        let (called, trace) = plugin.run_traced(&conn, &job).await;
        (called.result.map(|()| Vec::new()).map_err(|e| e.to_string()), trace)
    })
    .await
}

/// `plan` of one slot, page by page (at most `limit` keys in all).
pub async fn plan(
    (pool, logins): (&Pool, &Logins),
    runtime: &Runtime,
    plugin: &Plugin,
    slot: DateTime<Utc>,
    limit: u32,
    commit: bool,
) -> anyhow::Result<Tried> {
    let applied = plugin.applied();
    let wit_slot = applied.wit_slot(&applied.slot_at(slot), &applied.period_label(slot));
    within((pool, logins), runtime, plugin, commit, |conn| async move {
        let (mut keys, mut statements) = (Vec::<String>::new(), Trace::default());
        loop {
            let page = (limit as usize).saturating_sub(keys.len()).min(1000) as u32;
            if page == 0 {
                break;
            }
            let (called, traced) = plugin.plan_traced(&conn, &wit_slot, keys.last().map(String::as_str), page, true).await;
            statements.extend(traced);
            match called.result {
                Ok(found) if found.is_empty() => break,
                Ok(found) => keys.extend(found),
                Err(e) => return (Err(e.to_string()), statements),
            }
        }
        (Ok(keys), statements)
    })
    .await
}

/// One transaction in a session of the plugin's login: its setup, `call`, then COMMIT
/// when asked (and the call succeeded), else ROLLBACK. The login is made (and the
/// setup's right to create tables given, then taken back) through `pool`, as the host.
async fn within<F, Fut>((pool, logins): (&Pool, &Logins), runtime: &Runtime, plugin: &Plugin, commit: bool, call: F) -> anyhow::Result<Tried>
where
    F: FnOnce(Arc<crate::db::Conn>) -> Fut,
    Fut: std::future::Future<Output = (Result<Vec<String>, String>, Trace)>,
{
    let mut host = pool.get().await?;
    // From the right to create tables given to it taken back, no other setup comes
    // between; the dry run's call runs after, in the same open transaction.
    let lock = crate::access::SetupLock::take(pool).await?;
    crate::catalog::prepare_login(&mut host, plugin, &runtime.policy).await.map_err(|e| e.context(format!("setting up {}", plugin.name())))?;
    let conn = async {
        let conn = Arc::new(logins.get(plugin.name()).await?);
        conn.batch_execute("BEGIN").await?;
        if let Err(e) = crate::catalog::dry_setup(&***conn, plugin).await {
            conn.batch_execute("ROLLBACK").await?;
            return Err(e.context(format!("setting up {}", plugin.name())));
        }
        anyhow::Ok(conn)
    }
    .await;
    crate::catalog::finish_login(&mut host, plugin).await?;
    lock.release().await?;
    let conn = conn?;
    let started = Instant::now();
    let (outcome, trace) = call(conn.clone()).await;
    let elapsed = started.elapsed();
    let committed = commit && outcome.is_ok();
    conn.batch_execute(if committed { "COMMIT" } else { "ROLLBACK" }).await?;
    Ok(Tried { trace, outcome, elapsed, committed })
}
