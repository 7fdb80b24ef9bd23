//! The catalog: which plugins this host serves. The plugins folder is loaded at start,
//! then watched. A new or changed `.wasm` is compiled in the background and swapped in
//! for new claims; jobs already claimed finish on the version they started with; a
//! refused file leaves the version before it serving;
//! a removed plugin's jobs stay pending for a host that has it.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::db::{Conn, Pool};
use anyhow::Context;
use notify::{event::AccessKind, EventKind, RecursiveMode, Watcher};
use tokio_util::sync::CancellationToken;

use crate::capability::db::Policy;
use crate::config::{Config, ConfigError, TaskSettings};
use crate::db::Sql;
use crate::metrics::Metrics;
use crate::plugin::{LoadError, Loaded, Plugin, PluginFile, Registry, Runtime};
use crate::{access, scheduler};

pub mod calls;
pub mod refused;
use refused::Refused;

/// How long the folder must be quiet before it is read: a file being copied in sends
/// several events, and reading it half written would refuse it for nothing.
const QUIET: Duration = Duration::from_millis(250);
/// How often the folder is read when it cannot be watched, and how soon a reload that
/// failed because the database was away is tried again.
const RETRY: Duration = Duration::from_secs(2);
/// How often a host that refused a file for disagreeing with its task's stored schedule
/// looks whether the schedule changed (one small query).
const FOLLOW_APPLY: Duration = Duration::from_secs(5);

/// Why a plugin file is not serving (the version before it, if any, still is).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{file}: {}", crate::db::error_chain(&**.source))]
    Setup { file: String, task: String, source: Box<dyn std::error::Error + Send + Sync> },
    /// Its file (or plugin) disagrees with the stored schedule every host runs by.
    #[error("{file}: {source}")]
    Disagrees { file: String, source: scheduler::applied::Disagreement },
}

impl Refusal {
    /// The database was away: the same file may load on the next try.
    pub fn transient(&self) -> bool {
        matches!(self, Refusal::Setup { source, .. } if crate::db::is_transient(&**source))
    }
}

pub struct Folder {
    runtime: Arc<Runtime>,
    dir: PathBuf,
    config: Option<Config>,
    metrics: Arc<Metrics>,
    /// Sessions as each plugin's own login: where its setup runs.
    logins: Arc<crate::login::Logins>,
    /// What the executor and the scheduler read; replaced whole when the folder changes.
    pub loaded: Arc<Loaded>,
    /// Files refused for good, with the digest refused: not tried (or reported) again
    /// until their content changes.
    refused: HashMap<PathBuf, String>,
    /// Of those, files that disagree with their task's stored schedule, with the task and
    /// the revision they disagree with: tried again when it changes (an `almanac apply`
    /// may have made them agree).
    disagreeing: HashMap<PathBuf, (String, i64)>,
    /// A text of the configuration file that did not parse: reported once, not again.
    config_refused: Option<String>,
    /// Every file refused now (for good or until a retry succeeds), for operators.
    refusals: refused::Board,
    /// Register each task's schedule and record refused deploys (a serving host does;
    /// `backfill` does not, so that a backfill, failed or not, leaves no schedule behind
    /// that no host runs, and no refusal no host has).
    pub register_schedules: bool,
}

impl Folder {
    pub fn new(runtime: Arc<Runtime>, dir: PathBuf, config: Option<Config>, metrics: Arc<Metrics>, logins: Arc<crate::login::Logins>) -> Folder {
        Folder {
            runtime,
            dir,
            config,
            metrics,
            logins,
            loaded: Arc::default(),
            refused: HashMap::new(),
            disagreeing: HashMap::new(),
            config_refused: None,
            refusals: refused::Board::default(),
            register_schedules: true,
        }
    }

    /// The configuration file the folder's plugins are adjusted by, if any.
    pub fn config(&self) -> Option<&Config> {
        self.config.as_ref()
    }

    /// Read the configuration file again if it changed on disk, so a reload runs by the
    /// file as it is now, not as it was at start; files refused before are tried again
    /// with it. A text that does not parse is reported once and the one before stays in
    /// force. (Outbox topics are read at start only: a change is warned of.) Returns
    /// whether it changed.
    fn reread_config(&mut self) -> bool {
        let Some(path) = self.config.as_ref().map(|c| c.file().to_owned()) else { return false };
        let Ok(text) = std::fs::read_to_string(&path) else { return false };
        if self.config.as_ref().is_some_and(|c| c.text() == text) || self.config_refused.as_deref() == Some(text.as_str()) {
            return false;
        }
        match Config::parse(&path, text.clone()) {
            Ok(config) => {
                tracing::info!(file = %path, "configuration file changed: plugin files loaded from now on (new, changed or refused before, tried again now) follow it; a serving plugin's settings change with `almanac apply`");
                // The dispatcher's sinks are built at start (their TLS, their clients).
                let topics = |c: Option<&Config>| c.map(|c| c.outbox().ok());
                if topics(self.config.as_ref()) != topics(Some(&config)) {
                    tracing::warn!(file = %path, "the [outbox] section changed: outbox topics are read at start, so restart this host to deliver by it");
                }
                self.config = Some(config);
                self.config_refused = None;
                self.refused.clear();
                self.disagreeing.clear();
                true
            }
            Err(e) => {
                tracing::error!("configuration file not re-read: {e}; the one read before stays in force");
                self.config_refused = Some(text);
                false
            }
        }
    }

    /// Bring the loaded plugins in line with the folder: unchanged files keep their
    /// plugin, new and changed ones are loaded and set up, removed ones are dropped.
    /// Returns what was refused; an error only when the folder cannot be read.
    pub async fn scan(&mut self, conn: &mut Conn) -> anyhow::Result<Vec<Refusal>> {
        self.reread_config();
        // Functions made since the last read count from now on (the database away: the
        // names known stay, and nothing loads this time anyway).
        match calls::reachable(&***conn).await {
            Ok(names) => self.runtime.policy.learn_functions(names),
            Err(e) => tracing::debug!("cannot read the database's functions: {}", crate::db::error_chain(&e)),
        }
        let files = wasm_files(&self.dir)?;
        let current = self.loaded.load_full();
        let mut next = Registry::default();
        let mut refusals = Vec::new();
        let mut admitted = Vec::new();
        let mut changed = false;
        for path in &files {
            let old = current.by_path(path);
            let serving = match PluginFile::read(path) {
                Ok(file) if old.is_some_and(|p| p.digest == file.digest) => old.cloned(),
                Ok(file) if self.refused.get(path) == Some(&file.digest) => old.cloned(),
                Ok(file) => {
                    self.disagreeing.remove(path);
                    let digest = file.digest.clone();
                    match self.admit(conn, file, &next).await {
                        Ok(plugin) => {
                            changed = true;
                            self.refused.remove(path);
                            self.refusals.remove(path);
                            let plugin = Arc::new(plugin);
                            admitted.push((plugin.clone(), old.cloned()));
                            Some(plugin)
                        }
                        Err(refusal) => {
                            // A file that cannot load stays refused until it changes; a
                            // setup that failed (a table not created yet, the database
                            // away) is tried again on the next scan.
                            if !matches!(refusal, Refusal::Setup { .. }) {
                                self.refused.insert(path.clone(), digest.clone());
                            }
                            if let Refusal::Disagrees { source, .. } = &refusal {
                                self.disagreeing.insert(path.clone(), (source.task.clone(), source.revision));
                            }
                            self.report_refused(path, &digest, &refusal, old);
                            refusals.push(refusal);
                            old.cloned()
                        }
                    }
                }
                // Gone or unreadable since the listing: keep what was loaded from it.
                Err(e) => {
                    tracing::warn!("plugin file not read: {e}");
                    old.cloned()
                }
            };
            // An unchanged file whose task a new file took earlier in this scan.
            if let Some((plugin, Err(e))) = serving.map(|plugin| (plugin.clone(), next.insert(plugin))) {
                let refusal = Refusal::Load(e);
                self.report_refused(&plugin.path, &plugin.digest, &refusal, None);
                refusals.push(refusal);
            }
        }
        for gone in current.iter().filter(|p| next.get(p.name()).is_none_or(|now| now.path != p.path)) {
            changed = true;
            if !files.contains(&gone.path) {
                tracing::warn!(task = %gone.name(), file = %crate::text::printable_path(&gone.path), "plugin removed: its pending jobs wait for a host that has it");
            }
        }
        self.refused.retain(|path, _| files.contains(path));
        let refused = &self.refused;
        self.disagreeing.retain(|path, _| refused.contains_key(path));
        // A file refused for taking another's task may serve again once that one is gone.
        self.refusals.retain(|path, r| files.contains(path) && next.by_path(path).is_none_or(|p| p.digest != r.digest));
        if changed {
            self.loaded.store(Arc::new(next));
        }
        // Reported once swapped in: from this line on, jobs that start run the new version.
        for (plugin, old) in &admitted {
            report_loaded(plugin, old.as_ref());
        }
        self.metrics.set_plugins_refused(self.refusals.len());
        self.record_refusals(conn).await;
        Ok(refusals)
    }

    /// Load one file and, if no other file provides its task, give it its tables and role,
    /// record it and register its schedule.
    async fn admit(&self, conn: &mut Conn, file: PluginFile, next: &Registry) -> Result<Plugin, Refusal> {
        let mut plugin = self.runtime.load_file(file).await?;
        let settings = match &self.config {
            Some(config) => config.apply_to(&mut plugin.spec)?,
            None => Config::none().apply_to(&mut plugin.spec)?,
        };
        plugin.set_settings(settings.values.clone());
        next.check_free(&plugin)?;
        // Where this host's idea of the schedule comes from, for a disagreement's message.
        let source = match self.config.as_ref().and_then(|c| c.section_of(plugin.name())) {
            Some(section) => section,
            None => format!("{} (as its plugin declares it)", plugin.path.display()),
        };
        let file = plugin.path.display().to_string();
        install(conn, &self.logins, &plugin, &self.runtime.policy, &settings, self.register_schedules.then_some(source.as_str())).await.map_err(|e| {
            match e.downcast::<scheduler::applied::Disagreement>() {
                Ok(source) => Refusal::Disagrees { file, source },
                Err(e) => Refusal::Setup { file, task: plugin.name().to_owned(), source: e.into() },
            }
        })?;
        Ok(plugin)
    }

    /// Un-refuse the files whose task's stored schedule changed since they disagreed
    /// with it, so the next scan tries them again (it changes nothing for the others).
    async fn forget_changed_schedules(&mut self, conn: &Conn) -> bool {
        let tasks: Vec<String> = self.disagreeing.values().map(|(task, _)| task.clone()).collect();
        let Ok(now) = scheduler::applied::revisions(conn, &tasks).await else { return false };
        let changed: Vec<PathBuf> =
            self.disagreeing.iter().filter(|(_, (task, revision))| now.get(task) != Some(revision)).map(|(path, _)| path.clone()).collect();
        for path in &changed {
            tracing::info!(file = %crate::text::printable_path(path), "the stored schedule this file disagreed with changed: trying it again");
            self.refused.remove(path);
            self.disagreeing.remove(path);
        }
        !changed.is_empty()
    }

    /// Whether `almanac.refused_deploys` is behind this host's refusals, or due to hear
    /// that they still stand.
    fn refusals_due(&self) -> bool {
        self.register_schedules && self.refusals.due()
    }

    async fn record_refusals(&mut self, conn: &Conn) {
        if self.refusals_due() {
            let dir = self.recorded_dir();
            self.refusals.record(&***conn, &dir).await;
        }
    }

    async fn clear_refusals(&self, pool: &Pool) {
        if self.register_schedules {
            self.refusals.clear(pool, &self.recorded_dir()).await;
        }
    }

    /// The folder as its rows name it: one name however the host was pointed at it
    /// (relative, through a link), so a restart replaces the rows it left.
    fn recorded_dir(&self) -> PathBuf {
        std::fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone())
    }

    fn report_refused(&mut self, path: &Path, digest: &str, refusal: &Refusal, old: Option<&Arc<Plugin>>) {
        self.metrics.record_load_failure();
        let task = match refusal {
            Refusal::Setup { task, .. } => Some(task.clone()),
            Refusal::Disagrees { source, .. } => Some(source.task.clone()),
            Refusal::Load(LoadError::Duplicate { task, .. }) => Some(task.clone()),
            _ => old.map(|p| p.name().to_owned()),
        };
        let serving = old.map(|p| format!("{} ({})", p.spec.version, &p.digest[..12]));
        self.refusals.insert(path.to_owned(), Refused { digest: digest.to_owned(), task, serving, reason: bounded_reason(refusal) });
        // One line each: a file's name, or a plugin's text in the reason, may hold a newline.
        let disagrees = matches!(refusal, Refusal::Disagrees { .. });
        let refusal = crate::text::printable(&refusal.to_string()).into_owned();
        // A file that differs from the applied schedule waits for `almanac apply` (the
        // message says so): an operator's next step, not a fault to page anyone for.
        if disagrees {
            match old {
                Some(old) => {
                    tracing::warn!(task = %old.name(), "plugin not reloaded: {refusal}; version {} ({}) keeps serving", old.spec.version, &old.digest[..12])
                }
                None => tracing::warn!("plugin not loaded: {refusal}"),
            }
            return;
        }
        match old {
            Some(old) => tracing::error!(
                task = %old.name(),
                "plugin not reloaded: {refusal}; version {} ({}) keeps serving",
                old.spec.version,
                &old.digest[..12]
            ),
            None => tracing::error!("plugin not loaded: {refusal}"),
        }
    }

    /// Without a watch (`run --no-watch`): the refusals of the start stand until
    /// `shutdown`; say so every heartbeat, and take them back at the end.
    pub async fn keep(mut self, pool: Pool, shutdown: CancellationToken) {
        loop {
            let wait = if self.refusals.unrecorded() { RETRY } else { refused::HEARTBEAT };
            tokio::select! {
                _ = shutdown.cancelled() => return self.clear_refusals(&pool).await,
                _ = tokio::time::sleep(wait) => {}
            }
            if self.refusals_due() {
                let Ok(conn) = crate::db::connect(&pool, &shutdown).await else { return };
                self.record_refusals(&conn).await;
            }
        }
    }

    /// Watch the folder until `shutdown`, scanning it whenever it changes.
    pub async fn watch(mut self, pool: Pool, shutdown: CancellationToken) {
        let (tx, mut changes) = tokio::sync::mpsc::channel::<()>(1);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok_and(|e| is_plugin_change(&e)) {
                // Full means a scan is already due; it will see this change too.
                let _ = tx.try_send(());
            }
        })
        .and_then(|mut watcher| watcher.watch(&self.dir, RecursiveMode::NonRecursive).map(|()| watcher));
        let fallback = match &watcher {
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), "cannot watch the plugins folder ({e}); reading it every {RETRY:?} instead");
                Some(RETRY)
            }
        };
        // A file may have changed between the load at start and this watch: read the
        // folder once now, then on every change.
        let mut poll = Some(Duration::ZERO);
        // Whether the timer's end calls for a scan (a retry, polling without a watcher),
        // or only for a look at the schedules some files disagreed with.
        let mut scan_on_timer = true;
        loop {
            let mut due = scan_on_timer;
            let wait = async {
                match poll {
                    Some(after) => tokio::time::sleep(after).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return self.clear_refusals(&pool).await,
                _ = wait => {}
                event = changes.recv() => {
                    if event.is_none() {
                        return;
                    }
                    while let Ok(Some(())) = tokio::time::timeout(QUIET, changes.recv()).await {}
                    due = true;
                }
            }
            let config_changed = self.reread_config();
            let record = self.refusals_due();
            if !(due || config_changed || record || !self.disagreeing.is_empty()) {
                continue;
            }
            let Ok(mut conn) = crate::db::connect(&pool, &shutdown).await else { return };
            self.record_refusals(&conn).await;
            // Woken only to look at the configuration file and the schedules some files
            // disagreed with: scan only if one changed.
            let changed = config_changed || (!self.disagreeing.is_empty() && self.forget_changed_schedules(&conn).await);
            if !(due || changed) {
                // A retry scan still due keeps its timer; otherwise the write just made
                // (or failed) sets the next wake.
                if !scan_on_timer {
                    poll = self.next_wake(fallback);
                }
                continue;
            }
            let retry = match self.scan(&mut conn).await {
                Ok(refusals) => refusals.iter().any(Refusal::transient),
                Err(e) => {
                    tracing::error!("plugins folder not read: {e:#}");
                    true
                }
            };
            (poll, scan_on_timer) = match (retry, fallback) {
                (true, _) => (Some(RETRY), true),
                (false, Some(every)) => (Some(every), true),
                (false, None) => (self.next_wake(None), false),
            };
        }
    }

    /// When a watching host with nothing to retry wakes next without a change in the
    /// folder (`fallback`: it cannot be watched, and is read that often).
    fn next_wake(&self, fallback: Option<Duration>) -> Option<Duration> {
        match fallback {
            Some(every) => Some(every),
            // A schedule some files disagreed with, or a configuration file, is looked
            // at this often for a change.
            None if !self.disagreeing.is_empty() || self.config.is_some() => Some(FOLLOW_APPLY),
            // Refusals not recorded (the write failed) are tried again soon; recorded
            // ones are said to stand every heartbeat.
            None if self.register_schedules && self.refusals.unrecorded() => Some(RETRY),
            None if self.register_schedules && !self.refusals.is_empty() => Some(refused::HEARTBEAT),
            None => None,
        }
    }
}

/// The plugins of `dir`, loaded (compiled and described) and admitted nowhere: no setup,
/// role, grant or `almanac.plugins` row, so what reads them (`apply --dry-run`) changes
/// nothing. Files that do not load come back with why; two files of one task are an error.
pub async fn load_only(runtime: &Arc<Runtime>, dir: &Path) -> anyhow::Result<(Registry, Vec<String>)> {
    let mut registry = Registry::default();
    let mut refused = Vec::new();
    for path in wasm_files(dir)? {
        match runtime.load(&path).await {
            Ok(plugin) => registry.insert(Arc::new(plugin))?,
            Err(e) => refused.push(format!("{}: {e}", path.display())),
        }
    }
    Ok((registry, refused))
}

/// A refusal's text as it is recorded: bounded (it may quote a plugin's own strings) and
/// without NUL, which PostgreSQL's text refuses (one would keep every row from being written).
fn bounded_reason(refusal: &Refusal) -> String {
    crate::text::clip(refusal.to_string().replace('\0', "\\0"), crate::text::MAX_ERROR)
}

/// The `*.wasm` files directly in `dir`, sorted (the first file to claim a task keeps it).
pub(crate) fn wasm_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read plugins directory {}", dir.display()))?;
    let mut files: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file()).collect();
    files.sort();
    Ok(files)
}

/// A `.wasm` file appeared, changed, was closed after writing, or went away.
fn is_plugin_change(event: &notify::Event) -> bool {
    let kind = match event.kind {
        EventKind::Access(AccessKind::Close(notify::event::AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    };
    kind && event.paths.iter().any(|p| p.extension().is_some_and(|x| x == "wasm"))
}

fn report_loaded(plugin: &Plugin, old: Option<&Arc<Plugin>>) {
    let (task, version, digest, file) = (plugin.name(), &plugin.spec.version, &plugin.digest[..12], crate::text::printable_path(&plugin.path));
    match old {
        Some(old) => tracing::info!(
            %task, %version, %digest, %file, previous = %&old.digest[..12],
            "plugin reloaded: jobs starting now run the new version; jobs in flight finish on the old one"
        ),
        None => tracing::info!(%task, %version, %digest, %file, "plugin loaded"),
    }
}

/// Give a plugin its tables and its role (its idempotent DDL, checked, then grants of
/// exactly the tables it declares), record it as loaded and register its schedule.
/// Setup runs one plugin at a time across hosts, in a session of the plugin's own login.
async fn install(
    conn: &mut Conn,
    logins: &crate::login::Logins,
    plugin: &Plugin,
    policy: &Policy,
    settings: &TaskSettings,
    register: Option<&str>,
) -> anyhow::Result<()> {
    let spec = &plugin.spec;
    let pool = Conn::pool(conn).context("a host connection outside its pool")?;
    let lock = access::SetupLock::take(&pool).await?;
    let login = open_login(conn, plugin, policy).await?;
    if !spec.setup.is_empty() {
        let setup = async {
            let mut session = logins.get(plugin.name()).await?;
            let setup = session.transaction().await?;
            access::run_setup(&*setup, &spec.role, &spec.setup).await?;
            setup.commit().await?;
            session.batch_execute(crate::login::CLEAN).await?;
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = setup {
            // The right to create tables ends with the setup, whatever became of it. In
            // one transaction: revoked and granted statement by statement, a job of
            // another host running meanwhile found no right to its tables and failed
            // for good (the chaos test's `permission denied for table accounts`).
            let tx = conn.transaction().await?;
            match access::grant_present(&*tx, &spec.role, &spec.tables, true).await {
                Ok(()) => tx.commit().await?,
                Err(granting) => {
                    drop(tx);
                    close_setup(conn, &spec.role).await;
                    return Err(e.context(format!("and its grants could not be made again: {granting}")));
                }
            }
            return Err(e);
        }
    }
    let granted = async {
        let tx = conn.transaction().await?;
        // In the transaction of the grants: a job running meanwhile never finds its tables
        // neither the old role's nor the new one's.
        access::retire_shared_role(&*tx, plugin.name(), &spec.role, &login).await?;
        access::grant(&*tx, &spec.role, &spec.tables).await?;
        access::grant_enqueues(&*tx, &spec.role, &spec.enqueues).await?;
        let calls = calls::resolve(&*tx, plugin.name(), &spec.calls).await?;
        tx.exec(
            "INSERT INTO almanac.plugins (name, digest, version, calls) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO UPDATE SET digest = EXCLUDED.digest, version = EXCLUDED.version, calls = EXCLUDED.calls, loaded_at = now()",
            &[&plugin.name(), &plugin.digest, &spec.version, &serde_json::to_value(&calls)?],
        )
        .await?;
        let registered = match register {
            Some(source) => match scheduler::applied::register(&*tx, spec, settings, source).await {
                Ok(registered) => registered,
                Err(scheduler::applied::RegisterError::Db(e)) => return Err(e.into()),
                // Nothing of the set-up is kept: the task is not served here.
                Err(scheduler::applied::RegisterError::Disagrees(d)) => return Err(d.into()),
            },
            None => None,
        };
        tx.commit().await?;
        anyhow::Ok(registered)
    }
    .await;
    let registered = match granted {
        Ok(registered) => registered,
        Err(e) => {
            // Its grants rolled back, the setup's right to create tables (committed by
            // open_login) would stay with the role: taken back on its own.
            if !spec.setup.is_empty() {
                close_setup(conn, &spec.role).await;
            }
            return Err(e);
        }
    };
    lock.release().await?;
    if let Some(cursor) = registered {
        let cron = spec.schedule.as_ref().map_or("(on demand)", |s| s.cron());
        tracing::info!(task = %spec.name, cron, zone = %spec.zone.name(), cursor = %cursor, "schedule registered");
    }
    Ok(())
}

/// [`access::close_setup`] in a transaction of its own, after a load failed: logged if it
/// fails too (the next load under the setup lock takes the right back), so the load's own
/// error is the one reported.
async fn close_setup(conn: &mut Conn, role: &str) {
    let closed = async {
        let tx = conn.transaction().await?;
        access::close_setup(&*tx, Some(role)).await?;
        tx.commit().await?;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = closed {
        tracing::warn!(%role, "could not take back the setup's right to create tables: {e:#}");
    }
}

/// The plugin's setup statements, checked by the statement policy.
pub async fn check_setup(plugin: &Plugin, policy: &Policy) -> anyhow::Result<()> {
    let spec = &plugin.spec;
    let writable = spec.writable();
    let declared: Vec<String> = spec.tables.iter().map(|t| t.name.clone()).collect();
    for statement in &spec.setup {
        policy.check_setup(plugin.name(), statement, &writable, &declared, &spec.calls).await.with_context(|| format!("setup statement {statement:?}"))?;
    }
    Ok(())
}

/// Committed before a plugin's session can open (under the setup lock the caller holds):
/// its setup checked, its role, its login, and the right to create tables for its setup
/// (what a load that never finished left taken back first).
/// Returns the login's name.
async fn open_login(conn: &mut Conn, plugin: &Plugin, policy: &Policy) -> anyhow::Result<String> {
    let spec = &plugin.spec;
    check_setup(plugin, policy).await?;
    access::ensure_role(&***conn, &spec.role).await?;
    let tx = conn.transaction().await?;
    // Under the setup lock: what a load that never finished left, before this one's.
    access::close_setup(&*tx, None).await?;
    let login = crate::login::ensure(&*tx, plugin.name(), &spec.role, false).await?;
    if !spec.setup.is_empty() {
        access::open_setup(&*tx, &spec.role, &spec.writable()).await?;
    }
    tx.commit().await?;
    Ok(login)
}
