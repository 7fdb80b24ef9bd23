//! A dry run: one plugin's `run` (for one job) or `plan` (for one slot) against the
//! configured database, in a single transaction that is rolled back unless the caller
//! asks to commit, in a session of a login made for this dry run alone ([`DryRole`]),
//! holding what the tried file declares and dropped after: the task's live role and the
//! running version's rights are never touched. The plugin's setup runs inside that same
//! transaction, so a rolled-back dry run leaves no row and no table behind; what it
//! cannot roll back: sequences the plugin advanced (`nextval` is never rolled back).
//! Every statement the plugin sent is kept, with its parameters and what it did.
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::{Pool, Sql};
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
    /// The role the dry run ran as, made for it and dropped after it.
    pub role: String,
    /// The functions the tried file declares it calls, as the catalog has them.
    pub calls: Vec<crate::catalog::calls::Call>,
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
        // Under a role of the dry run's own, never the task's live one.
        plugin.run_as(&DryRole::new_name());
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

/// One transaction in a session of the dry run's own login: its setup, `call`, then
/// COMMIT when asked (and the call succeeded), else ROLLBACK. The login is made for this
/// dry run ([`DryRole`]) and dropped after it; nothing of the task's live role changes.
async fn within<F, Fut>((pool, logins): (&Pool, &Logins), runtime: &Runtime, plugin: &Plugin, commit: bool, call: F) -> anyhow::Result<Tried>
where
    F: FnOnce(Arc<crate::db::Conn>) -> Fut,
    Fut: std::future::Future<Output = (Result<Vec<String>, String>, Trace)>,
{
    crate::catalog::check_setup(plugin, &runtime.policy).await.map_err(|e| e.context(format!("setting up {}", plugin.name())))?;
    let mut host = pool.get().await?;
    // As a host loads it: its declared calls must exist, and the database's own functions
    // are what attribute notation and unqualified calls are held against.
    let calls = crate::catalog::calls::resolve(&**host, plugin.name(), &plugin.spec.calls).await?;
    runtime.policy.learn_functions(crate::catalog::calls::reachable(&**host).await?);
    DryRole::drop_abandoned(&mut host).await?;
    let role = DryRole::make(&mut host, plugin).await.map_err(|e| anyhow::Error::new(e).context(format!("setting up {}", plugin.name())))?;
    let tried = async {
        let conn = Arc::new(logins.session_as(plugin.name(), &role.name, &role.password).await?);
        conn.batch_execute("BEGIN").await?;
        if let Err(e) = crate::access::run_setup(&***conn, &role.name, &plugin.spec.setup).await {
            conn.batch_execute("ROLLBACK").await?;
            return Err(anyhow::Error::new(e).context(format!("setting up {}", plugin.name())));
        }
        let started = Instant::now();
        let (outcome, trace) = call(conn.clone()).await;
        let elapsed = started.elapsed();
        let committed = commit && outcome.is_ok();
        conn.batch_execute(if committed { "COMMIT" } else { "ROLLBACK" }).await?;
        anyhow::Ok(Tried { trace, outcome, elapsed, committed, role: role.name.clone(), calls })
    }
    .await;
    let committed = tried.as_ref().is_ok_and(|t| t.committed);
    role.drop(&mut host, committed.then_some(plugin)).await?;
    tried
}

/// A dry run's own login: a role made for one dry run, granted what the tried file
/// declares (the tables that exist, the right to create its writable ones, the outbox),
/// recorded in `almanac.dry_logins` so that its outbox messages are the task's, and
/// dropped after the dry run. Roles are the cluster's and a session logs in only as a
/// committed role, so it is committed; the task's live role is never touched.
pub struct DryRole {
    pub name: String,
    password: String,
}

/// A dry run that never finished leaves its role: dropped by a later one after this long.
const ABANDONED: &str = "1 hour";

impl DryRole {
    /// A role named for this dry run: `almanac_dry_` and 16 random hex digits.
    pub fn new_name() -> String {
        format!("almanac_dry_{}", &crate::login::new_password()[..16])
    }

    async fn make(host: &mut crate::db::Conn, plugin: &Plugin) -> Result<DryRole, crate::access::AccessError> {
        use crate::access;
        let (name, password) = (plugin.spec.role.clone(), crate::login::new_password());
        let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
        let tx = host.transaction().await?;
        let q = crate::db::quote_ident(&name);
        // The host a member, as of a task's role: so that it may drop what the role owns.
        tx.batch_execute(&format!("CREATE ROLE {q} LOGIN NOINHERIT PASSWORD '{verifier}'; GRANT {q} TO CURRENT_USER"))
            .await
            .map_err(|e| access::AccessError::CreateRole { role: name.clone(), reason: crate::db::error_chain(&e) })?;
        tx.exec("INSERT INTO almanac.dry_logins (login, task) VALUES ($1, $2)", &[&name, &plugin.name()]).await?;
        access::grant_present(&*tx, &name, &plugin.spec.tables, true).await?;
        // Of the host's bookkeeping, a dry run only publishes and enqueues (what it
        // declares: rolled back with it, unless --commit).
        tx.batch_execute(&format!(
            "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA almanac_job FROM {q}; GRANT EXECUTE ON FUNCTION almanac_job.publish(text, text, bytea, text) TO {q}; \
             GRANT EXECUTE ON FUNCTION almanac_job.enqueue(text, timestamptz, text, jsonb, timestamptz) TO {q}"
        ))
        .await?;
        access::grant_enqueues(&*tx, &name, &plugin.spec.enqueues).await?;
        if !plugin.spec.setup.is_empty() {
            access::open_setup(&*tx, &name, &plugin.spec.writable()).await?;
        }
        tx.commit().await?;
        Ok(DryRole { name, password })
    }

    /// Drop the role and everything granted to it. `kept`: the dry run committed, and the
    /// tables its setup made become the task's own role's (as a deploy would make them).
    async fn drop(self, host: &mut crate::db::Conn, kept: Option<&Plugin>) -> anyhow::Result<()> {
        forget(host, &self.name, kept.map(Plugin::name)).await
    }

    /// The roles of dry runs that never finished (their process died), made over
    /// [`ABANDONED`] ago in this database. What one of them owns (a `--commit` that died
    /// before its tables were handed over) becomes its task's role's, never dropped.
    async fn drop_abandoned(host: &mut crate::db::Conn) -> anyhow::Result<()> {
        let rows = host.rows(&format!("SELECT login, task FROM almanac.dry_logins WHERE made_at < now() - interval '{ABANDONED}'"), &[]).await?;
        for row in rows {
            let (login, task): (String, String) = (row.get(0), row.get(1));
            forget(host, &login, Some(&task)).await?;
        }
        Ok(())
    }
}

/// Drop dry-run role `name`, its grants and its row, in one transaction; with `hand_to`
/// (a task), what it owns becomes that task's role's first, so no process dying between
/// the two can lose a committed dry run's tables.
async fn forget(host: &mut crate::db::Conn, name: &str, hand_to: Option<&str>) -> anyhow::Result<()> {
    let q = crate::db::quote_ident(name);
    let live = match hand_to {
        Some(task) => {
            let live = crate::access::role_name(task, &crate::db::database_name(&***host).await?);
            crate::access::ensure_role(&***host, &live).await?;
            Some(crate::db::quote_ident(&live))
        }
        None => None,
    };
    let tx = host.transaction().await?;
    if tx.opt("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1", &[&name]).await?.is_some() {
        if let Some(live) = &live {
            tx.batch_execute(&format!("REASSIGN OWNED BY {q} TO {live}")).await?;
        }
        tx.batch_execute(&format!("DROP OWNED BY {q}; DROP ROLE {q}")).await?;
    }
    tx.exec("DELETE FROM almanac.dry_logins WHERE login = $1", &[&name]).await?;
    tx.exec("DELETE FROM almanac.enqueue_grants WHERE grantee = $1", &[&name]).await?;
    tx.commit().await?;
    Ok(())
}
