//! One running host: connect, migrate, load plugins, then serve the scheduler, the
//! executor's workers, the outbox dispatcher and the wake-up listener until shutdown.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::db::Pool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Folder, Refusal};
use crate::db::SessionSettings;
use crate::metrics::Metrics;
use crate::plugin::{Limits, Loaded, Registry, Runtime};
use crate::{access, executor, migrate, outbox, scheduler};

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
    /// Watch the plugins folder and reload what changes. Defaults to true for `run`.
    pub watch: bool,
    /// Where the host counts what it does (exported by `--listen`).
    pub metrics: Arc<Metrics>,
    /// Register the served tasks' schedules. Defaults to true; `backfill` generates a
    /// range without making the task scheduled.
    pub register_schedules: bool,
    /// The connection string leads to a transaction-pooling pooler (`--pooler`).
    /// Defaults to false.
    pub pooled: bool,
    /// A connection string straight to PostgreSQL, when the main one leads through a
    /// transaction-pooling pooler: what needs a session (LISTEN, migrations) uses it.
    pub direct_url: Option<String>,
}

impl Options {
    /// The plugins in `plugins_dir`, compiled code cached under `data_dir/cache`, and
    /// every other setting at its default (no `almanac.toml`, no watching).
    pub fn new(plugins_dir: PathBuf, data_dir: &std::path::Path) -> Options {
        Options {
            plugins_dir,
            config: None,
            cache_dir: Some(data_dir.join("cache")),
            limits: Limits::default(),
            executor: executor::Options::default(),
            scheduler: scheduler::Options::default(),
            session: SessionSettings::default(),
            migrate: true,
            shutdown_grace: Duration::from_secs(30),
            watch: false,
            metrics: Arc::default(),
            register_schedules: true,
            pooled: false,
            direct_url: None,
        }
    }
}

pub struct Host {
    pub pool: Pool,
    /// Sessions as each plugin's own login: where plugin SQL runs.
    pub logins: Arc<crate::login::Logins>,
    /// The plugins loaded now (swapped on reload).
    pub loaded: Arc<Loaded>,
    target: crate::db::Target,
    /// Where LISTEN connects: the database itself, never a transaction pooler.
    listen: Option<crate::db::Target>,
    options: Options,
    dispatcher: outbox::Dispatcher,
    folder: Folder,
}

impl Host {
    /// Connect (waiting for the database if it is down), migrate and load plugins.
    pub async fn start(url: &str, options: Options, shutdown: &CancellationToken) -> anyhow::Result<Host> {
        let target = crate::db::config(url, options.pooled, &options.session)?;
        tracing::info!(database = %target.describe(), "connecting");
        // Workers, plus the scheduler, the claim recorder, the claims sweep, the folder
        // watch and the heartbeat (the outbox dispatcher has a pool of its own).
        let pool = crate::db::Pool::new(&target.role("worker"), options.executor.workers + 6)?;
        let mut conn = crate::db::connect(&pool, shutdown).await?;
        // What needs a session (migrating, LISTEN) never goes through a transaction pooler.
        let session = match options.pooled {
            false => Some(target.clone()),
            true => options.direct_url.as_deref().map(|url| crate::db::direct(url, &options.session)).transpose()?,
        };
        if options.migrate {
            let applied = match (options.pooled, &session) {
                (false, _) => migrate::run(&target).await?,
                (true, Some(direct)) => migrate::run(direct).await?,
                (true, None) => {
                    migrate::check_current(&**conn).await?;
                    Vec::new()
                }
            };
            if !applied.is_empty() {
                tracing::info!(?applied, "migrations applied");
            }
        }
        if options.pooled {
            crate::db::check_pooled_settings(&**conn).await?;
            if session.is_none() {
                tracing::info!("through a pooler without --direct-url: no LISTEN wake-ups; idle workers poll every --poll-interval");
            }
        }
        let listen = session.map(|s| s.role("listen"));
        access::check_host_role(&**conn).await?;
        let database = crate::db::database_name(&**conn).await?;
        let runtime = Runtime::new(options.limits.clone(), options.cache_dir.clone(), target.tls.clone(), &database)?;
        // A configuration mistake stops the start: running with a setting silently
        // ignored is worse than not running.
        let file = options.config.as_deref().map(crate::config::Config::load).transpose()?;
        let topics = file.as_ref().map(|f| f.outbox()).transpose()?.unwrap_or_default();
        let dispatcher = outbox::Dispatcher::new(&topics, outbox::Options::default())?;
        outbox::operate::bind_publishers(&**conn, &topics).await?;
        // A session per worker per task at most, and one for the scheduler's plan.
        let logins = crate::login::Logins::new(&target, pool.clone(), options.executor.workers + 1);
        let mut folder = Folder::new(runtime, options.plugins_dir.clone(), file, options.metrics.clone(), logins.clone());
        folder.register_schedules = options.register_schedules;
        let loaded = folder.loaded.clone();
        // Tasks an override may name: those served, and those whose plugin loaded but
        // could not be set up (not a typo, so not a reason to refuse the start).
        let mut known = Vec::new();
        let mut failed = Vec::new();
        for refusal in folder.scan(&mut conn).await? {
            // A plugin that cannot load is reported and left out; a configuration
            // mistake, or the database going away mid set-up, stops (or restarts) the start.
            match refusal {
                Refusal::Config(_) => return Err(refusal.into()),
                _ if refusal.transient() => return Err(refusal.into()),
                Refusal::Setup { task, .. } => known.push(task),
                Refusal::Disagrees { source, .. } => known.push(source.task),
                Refusal::Load(e) => failed.push(e.to_string()),
            }
        }
        if let Some(file) = folder.config() {
            known.extend(loaded.load().tasks());
            known.sort();
            // A file that failed to load must not stop the tasks that did: a section that
            // may be its task's is a warning (config::check_tasks says which are errors).
            let registered: Vec<String> = scheduler::operate::list(&conn).await?.into_iter().map(|s| s.task).collect();
            for warning in file.check_tasks(&known, &registered, &failed)? {
                tracing::warn!("{warning}");
            }
        }
        if loaded.load().is_empty() {
            tracing::warn!(dir = %options.plugins_dir.display(), "no plugins loaded");
        }
        Ok(Host { pool, logins, loaded, target, listen, options, dispatcher, folder })
    }

    /// Where the host connects (for a pool of the listener's own).
    pub fn target(&self) -> crate::db::Target {
        self.target.clone()
    }

    /// The scheduler's options (a backfill from the console plans by them).
    pub fn scheduler_options(&self) -> scheduler::Options {
        self.options.scheduler.clone()
    }

    /// The outbox topics this host delivers (those `almanac.toml` gives a sink).
    pub fn outbox_topics(&self) -> Vec<String> {
        self.dispatcher.topics().to_vec()
    }

    /// The plugins loaded now.
    pub fn registry(&self) -> Arc<Registry> {
        self.loaded.load_full()
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
                Err(e) if crate::db::is_transient(e.as_ref()) && !shutdown.is_cancelled() => {
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
        let (schedules_tx, schedules_rx) = watch::channel(0u64);
        let mut tasks = tokio::task::JoinSet::new();
        // Without a listener the senders stay alive (idle workers then wait out their
        // poll interval instead of spinning on a closed channel).
        let _wake_tx = match &self.listen {
            Some(listen) => {
                // The executor wakes on new jobs and on a schedule's change (a task
                // released); the scheduler on a schedule's change.
                let routes = vec![(crate::wake::JOBS, wake_tx.clone()), (crate::wake::SCHEDULES, wake_tx), (crate::wake::SCHEDULES, schedules_tx)];
                tasks.spawn(crate::wake::listen(listen.clone(), routes, shutdown.clone()));
                None
            }
            None => Some((wake_tx, schedules_tx)),
        };
        let changes = self.listen.is_some().then_some(schedules_rx);
        tasks.spawn(scheduler::run(self.pool.clone(), self.logins.clone(), self.loaded.clone(), self.options.scheduler.clone(), changes, shutdown.clone()));
        let busy = Arc::new(executor::share::Busy::default());
        let beat = crate::hosts::Beat {
            id: crate::db::this_host(),
            workers: self.options.executor.workers,
            loaded: self.loaded.clone(),
            busy: busy.clone(),
            task_workers: self.options.executor.task_workers,
        };
        tasks.spawn(crate::hosts::heartbeat(self.pool.clone(), beat, shutdown.clone()));
        let listening = executor::Options { listening: self.listen.is_some(), ..self.options.executor.clone() };
        tasks.spawn(executor::run(
            self.pool.clone(),
            self.logins.clone(),
            self.loaded.clone(),
            listening,
            self.options.metrics.clone(),
            busy,
            wake_rx,
            shutdown.clone(),
        ));
        match self.options.watch {
            true => tasks.spawn(self.folder.watch(self.pool.clone(), shutdown.clone())),
            false => tasks.spawn(self.folder.keep(self.pool.clone(), shutdown.clone())),
        };
        tasks.spawn(self.dispatcher.run(self.target.clone(), self.listen.clone(), shutdown.clone()));
        shutdown.cancelled().await;
        tracing::info!(grace = ?self.options.shutdown_grace, "shutting down: finishing in-flight work");
        let drained = tokio::time::timeout(self.options.shutdown_grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("grace period over; abandoning in-flight work (the database rolls it back)");
        }
        Ok(())
    }
}
