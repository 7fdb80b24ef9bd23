//! One running host: connect, migrate, load plugins, then serve the scheduler, the
//! executor's workers, the outbox dispatcher and the wake-up listener until shutdown.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use deadpool_postgres::Pool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::db::SessionSettings;
use crate::plugin::{Limits, Plugin, Registry, Runtime};
use crate::capability::db::Policy;
use crate::{access, executor, migrate, outbox, scheduler};

/// Key of the advisory lock plugin setup SQL runs under.
const SETUP_LOCK: i64 = 0x616c_6d61_6e61_64;

/// Everything `almanac run` is told.
#[derive(Debug, Clone)]
pub struct Options {
    pub plugins_dir: PathBuf,
    /// Per-task overrides (`almanac.toml`). Defaults to none.
    pub config: Option<PathBuf>,
    /// Where compiled plugins are cached. Defaults to `.almanac/cache`.
    pub cache_dir: Option<PathBuf>,
    pub limits: Limits,
    pub executor: executor::Options,
    pub scheduler: scheduler::Options,
    pub session: SessionSettings,
    /// Apply pending migrations at start. Defaults to true.
    pub migrate: bool,
    /// How long in-flight work may take to finish after SIGTERM. Defaults to 30 s.
    pub shutdown_grace: Duration,
}

pub struct Host {
    pub pool: Pool,
    pub registry: Arc<Registry>,
    config: tokio_postgres::Config,
    options: Options,
    dispatcher: outbox::Dispatcher,
}

impl Host {
    /// Connect (waiting for the database if it is down), migrate and load plugins.
    pub async fn start(url: &str, options: Options, shutdown: &CancellationToken) -> anyhow::Result<Host> {
        let config = crate::db::config(url, &options.session)?;
        let pool = crate::db::pool(config.clone(), options.executor.workers + 4)?;
        let mut conn = crate::db::connect(&pool, shutdown).await?;
        if options.migrate {
            let applied = migrate::run(&mut conn).await?;
            if !applied.is_empty() {
                tracing::info!(?applied, "migrations applied");
            }
        }
        access::check_host_role(&**conn).await?;
        let runtime = Runtime::new(options.limits.clone(), options.cache_dir.clone())?;
        let (mut registry, failures) = Registry::load_dir(&runtime, &options.plugins_dir).await?;
        for failure in &failures {
            tracing::error!("plugin not loaded: {failure}");
        }
        // A configuration mistake stops the start: running with a setting silently
        // ignored is worse than not running.
        let (settings, topics) = match &options.config {
            Some(path) => {
                let file = crate::config::Config::load(path)?;
                (file.apply(&mut registry)?, file.outbox()?)
            }
            None => Default::default(),
        };
        let dispatcher = outbox::Dispatcher::new(&topics, outbox::Options::default())?;
        let mut rejected = Vec::new();
        for plugin in registry.iter() {
            if let Err(e) = setup(&mut conn, plugin, &runtime.policy).await {
                tracing::error!(task = %plugin.name(), "plugin not loaded: {}", crate::db::error_chain(&*e));
                rejected.push(plugin.name().to_owned());
            }
        }
        for name in rejected {
            registry.remove(&name);
        }
        for plugin in registry.iter() {
            conn.execute(
                "INSERT INTO almanac.plugins (name, digest, version) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET digest = EXCLUDED.digest, version = EXCLUDED.version, loaded_at = now()",
                &[&plugin.name(), &plugin.digest, &plugin.spec.version],
            )
            .await?;
            tracing::info!(task = %plugin.name(), version = %plugin.spec.version, digest = %&plugin.digest[..12], file = %plugin.path.display(), "plugin loaded");
        }
        if registry.is_empty() {
            tracing::warn!(dir = %options.plugins_dir.display(), "no plugins loaded");
        }
        scheduler::register(&conn, &registry, &settings).await?;
        Ok(Host { pool, registry: Arc::new(registry), config, options, dispatcher })
    }

    /// Dispatcher settings other than the defaults (`almanac run --outbox-*`).
    pub fn outbox_options(mut self, options: outbox::Options) -> Host {
        self.dispatcher.options = options;
        self
    }

    /// [`Host::start`], started over while the failure is the database going away
    /// (a restart or crash mid start-up); a mistake (bad config, unreadable folder) is
    /// returned at once.
    pub async fn start_retrying(url: &str, options: Options, shutdown: &CancellationToken) -> anyhow::Result<Host> {
        let mut delay = Duration::from_millis(200);
        loop {
            match Host::start(url, options.clone(), shutdown).await {
                Err(e) if is_transient(&e) && !shutdown.is_cancelled() => {
                    tracing::warn!(retry_in = ?delay, "database unavailable during start-up: {e:#}");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = shutdown.cancelled() => return Err(e),
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }

    /// Serve until `shutdown`, then let in-flight batches finish within the grace period.
    pub async fn serve(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let (wake_tx, wake_rx) = watch::channel(0u64);
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(crate::wake::listen(self.config.clone(), crate::wake::JOBS, wake_tx, shutdown.clone()));
        tasks.spawn(scheduler::run(self.pool.clone(), self.registry.clone(), self.options.scheduler.clone(), shutdown.clone()));
        tasks.spawn(executor::run(self.pool.clone(), self.registry.clone(), self.options.executor.clone(), wake_rx, shutdown.clone()));
        tasks.spawn(self.dispatcher.run(self.pool.clone(), self.config.clone(), shutdown.clone()));
        shutdown.cancelled().await;
        tracing::info!(grace = ?self.options.shutdown_grace, "shutting down: finishing in-flight work");
        let drained = tokio::time::timeout(self.options.shutdown_grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("grace period over; abandoning in-flight work (the database rolls it back)");
        }
        Ok(())
    }
}

/// Give a plugin its tables and its role: check and apply its idempotent DDL, then grant
/// its role exactly the tables it declares. One plugin at a time across hosts.
async fn setup(conn: &mut deadpool_postgres::Object, plugin: &Plugin, policy: &Policy) -> anyhow::Result<()> {
    let spec = &plugin.spec;
    let writable: Vec<String> = spec.tables.iter().filter(|t| t.write).map(|t| t.name.clone()).collect();
    for statement in &spec.setup {
        policy.check_setup(statement, &writable).with_context(|| format!("setup statement {statement:?}"))?;
    }
    let client: &tokio_postgres::Client = conn;
    access::ensure_role(client, &spec.role).await?;
    let tx = conn.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK]).await?;
    for statement in &spec.setup {
        tx.batch_execute(statement).await.with_context(|| format!("setup statement {statement:?} failed"))?;
    }
    access::grant(&tx, &spec.role, &spec.tables).await?;
    tx.commit().await?;
    Ok(())
}

/// Whether an error is the database connection failing rather than a statement's or a
/// configuration's fault.
fn is_transient(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        if let Some(pg) = cause.downcast_ref::<tokio_postgres::Error>() {
            let code = pg.code().map(|c| c.code().to_owned());
            return pg.is_closed()
                || pg.as_db_error().is_none()
                || code.is_some_and(|c| c.starts_with("08") || c.starts_with("57P"));
        }
        cause.is::<deadpool_postgres::PoolError>()
    })
}
