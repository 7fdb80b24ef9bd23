//! One shared [`Runtime`] (engine, linker, on-disk cache of compiled code), one
//! [`Plugin`] per component, a fresh instance per call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::Conn;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use crate::bindings::almanac::plugin as wit;
use crate::bindings::almanac::plugin::types::{Job, Slot};
use crate::bindings::exports::almanac::plugin::task::TaskError;
use crate::bindings::Transaction;
use crate::capability::business::Today;
use crate::capability::config::Settings;
use crate::capability::db::{Ending, Lent, Policy, Session, Trace};
use crate::capability::log::{CallFields, Logger};
use crate::task::TaskSpec;

use super::error::{CallError, LoadError};
use super::limits::Limits;
use super::state::{HostState, MemoryCap, MemoryExceeded};
use super::world::{self, Instance, Pre};

/// How often the engine's epoch advances; the resolution of plugin deadlines.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Extra time an entire call may take beyond its deadline before the host gives up on
/// it and discards the connection it was using.
const HARD_DEADLINE_SLACK: Duration = Duration::from_secs(10);

/// Bytes of each instance's memory kept resident and reset in place between jobs, of
/// which PAGEMAP_SCAN (Linux 6.7+; elsewhere a memset of the lowest bytes) finds the
/// pages a job dirtied. Measured with `almanac bench` (plugin overhead per job): Rust
/// daily-points 16–19 µs at 256 KiB, 16 MiB and 64 MiB alike; the TypeScript one
/// (a ~10 MB pre-initialised SpiderMonkey heap) 1,134 µs at 256 KiB without the scan,
/// 632 µs at 16 MiB with it, 718 µs at 64 MiB. What stays resident is per pooled slot.
const KEEP_RESIDENT: usize = 16 << 20;

/// Pooling-allocator slots per plugin instance: enough for a componentize-py component
/// (measured: 32 core-instance slots ran out at 3 concurrent Python instances).
const CORE_INSTANCES_PER_PLUGIN: u32 = 16;
const MEMORIES_PER_PLUGIN: u32 = 4;
const TABLES_PER_PLUGIN: u32 = 8;

/// The shared engine, linker and compiled-code cache.
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    cache_dir: Option<PathBuf>,
    limits: Limits,
    /// The statement policy every plugin's statements pass.
    pub policy: Arc<Policy>,
    /// How a cancel request reaches the database (over TLS when its connections are).
    cancel_tls: crate::db::Tls,
    /// The database the plugins are served in: their roles are its own.
    database: String,
    /// Instances kept warm now, across plugins (at most `limits.warm`).
    warm: std::sync::atomic::AtomicUsize,
    _ticker: std::thread::JoinHandle<()>,
}

impl Runtime {
    /// A runtime for plugins served in `database` (as `current_database()` names it).
    pub fn new(limits: Limits, cache_dir: Option<PathBuf>, cancel_tls: crate::db::Tls, database: &str) -> anyhow::Result<Arc<Runtime>> {
        let mut pool = PoolingAllocationConfig::default();
        let slots = limits.instances + limits.warm;
        pool.total_component_instances(slots)
            // A Rust plugin is one or two core instances with one memory; a Python one
            // (componentize-py) about a dozen core instances with several memories and
            // tables. Slots are address space reserved, not memory used.
            .total_core_instances(slots * CORE_INSTANCES_PER_PLUGIN)
            .total_memories(slots * MEMORIES_PER_PLUGIN)
            .total_tables(slots * TABLES_PER_PLUGIN)
            // The limiter refuses growth past the cap with a clear error; the pool only
            // needs room for it.
            .max_memory_size(limits.memory_bytes + (1 << 16))
            // Reset a freed instance's memory by zeroing it in place rather than
            // unmapping it: no page faults and no TLB shootdowns across cores on the
            // next job (profiled: they were most of the host's CPU per job).
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(KEEP_RESIDENT)
            .pagemap_scan(wasmtime::Enabled::Auto);
        let mut config = Config::new();
        config.epoch_interruption(true).allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // Cranelift's single-pass register allocator: a 12 MB TypeScript component compiles
        // in 4.7 s instead of 6.5 s on two cores (a Python one 3.6 s instead of 5.5 s); its
        // jobs cost 275 µs of plugin overhead instead of 238, Rust's 17.7 µs as before
        // (almanac bench --languages, 2026-12-06).
        config.cranelift_regalloc_algorithm(wasmtime::RegallocAlgorithm::SinglePass);
        let engine = Engine::new(&config).map_err(wasm_error)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm_error)?;
        // Each interface is linked to the part of the store it needs: the capabilities
        // know nothing of the runtime.
        wit::types::add_to_linker::<HostState, HasSelf<Session>>(&mut linker, |s| &mut s.db).map_err(wasm_error)?;
        wit::db::add_to_linker::<HostState, HasSelf<Session>>(&mut linker, |s| &mut s.db).map_err(wasm_error)?;
        wit::outbox::add_to_linker::<HostState, HasSelf<Session>>(&mut linker, |s| &mut s.db).map_err(wasm_error)?;
        wit::log::add_to_linker::<HostState, HasSelf<Logger>>(&mut linker, |s| &mut s.log).map_err(wasm_error)?;
        wit::config::add_to_linker::<HostState, HasSelf<Settings>>(&mut linker, |s| &mut s.config).map_err(wasm_error)?;
        wit::business::add_to_linker::<HostState, HasSelf<Today>>(&mut linker, |s| &mut s.today).map_err(wasm_error)?;
        wit::jobs::add_to_linker::<HostState, HasSelf<Session>>(&mut linker, |s| &mut s.db).map_err(wasm_error)?;
        world::add_older_to_linker(&mut linker).map_err(wasm_error)?;
        let ticker = {
            let engine = engine.weak();
            std::thread::Builder::new().name("almanac-epoch".into()).spawn(move || {
                while let Some(engine) = engine.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })?
        };
        let policy = Arc::new(Policy::new(&limits.allow_functions, &limits.deny_functions).map_err(|e| anyhow::anyhow!(e))?);
        Ok(Arc::new(Runtime {
            engine,
            linker,
            cache_dir,
            limits,
            policy,
            cancel_tls,
            database: database.to_owned(),
            warm: std::sync::atomic::AtomicUsize::new(0),
            _ticker: ticker,
        }))
    }

    /// Compile (or fetch from the cache) and describe one plugin file.
    pub async fn load(self: &Arc<Self>, path: &Path) -> Result<Plugin, LoadError> {
        self.load_file(PluginFile::read(path)?).await
    }

    /// Compile (or fetch from the cache) and describe a plugin file already read.
    /// Compiling is CPU work of a second or more: it runs off the async threads, so a
    /// reload does not stall the jobs running meanwhile.
    pub async fn load_file(self: &Arc<Self>, file: PluginFile) -> Result<Plugin, LoadError> {
        let PluginFile { path, bytes, digest } = file;
        let name = path.display().to_string();
        let component = {
            let (runtime, file, digest) = (self.clone(), name.clone(), digest.clone());
            tokio::task::spawn_blocking(move || runtime.compile(&file, &bytes, &digest))
                .await
                .map_err(|e| LoadError::Invalid { file: name.clone(), reason: format!("compilation did not finish: {e}") })??
        };
        let pre = Pre::new(&self.linker, &self.engine, &component).map_err(|reason| LoadError::World { file: name.clone(), reason })?;
        let mut plugin = Plugin {
            runtime: self.clone(),
            pre,
            path,
            digest,
            spec: TaskSpec::placeholder(),
            role: None,
            applied: arc_swap::ArcSwapOption::empty(),
            settings: arc_swap::ArcSwap::from_pointee(Settings::default()),
            suspended: std::sync::atomic::AtomicBool::new(false),
            suspensions: std::sync::atomic::AtomicU64::new(0),
            warm: std::sync::Mutex::new(Vec::new()),
        };
        let info = plugin.describe().await.map_err(|e| LoadError::Describe { file: name.clone(), reason: e.to_string() })?;
        plugin.spec = TaskSpec::from_info(info, &self.database).map_err(|reason| LoadError::Spec { file: name.clone(), reason })?;
        if plugin.spec.timeout > self.limits.max_timeout {
            tracing::warn!(
                file = %name, task = %plugin.spec.name, declared = ?plugin.spec.timeout, cap = ?self.limits.max_timeout,
                "the plugin declares a timeout longer than the host allows (--max-timeout); its jobs get the host's maximum"
            );
            plugin.spec.timeout = self.limits.max_timeout;
        }
        plugin.role = Some(Arc::new(crate::access::Role::new(&plugin.spec.role, &plugin.spec.calls)));
        Ok(plugin)
    }

    fn compile(&self, file: &str, bytes: &[u8], digest: &str) -> Result<Component, LoadError> {
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => return Err(LoadError::CoreModule { file: file.into() }),
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(LoadError::NotWasm { file: file.into() }),
        }
        let cached = self.cache_path(digest);
        if let Some(path) = &cached {
            // SAFETY: the cache holds only what `serialize` wrote for this engine's
            // configuration (the file name includes its compatibility hash).
            if let Ok(component) = unsafe { Component::deserialize_file(&self.engine, path) } {
                return Ok(component);
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(|e| LoadError::Invalid { file: file.into(), reason: format!("{e:#}") })?;
        if let Some(path) = &cached {
            if let Err(e) = write_cache(path, &component) {
                tracing::warn!(path = %path.display(), "could not cache compiled plugin: {e:#}");
            }
        }
        Ok(component)
    }

    fn cache_path(&self, digest: &str) -> Option<PathBuf> {
        use std::hash::{Hash, Hasher};
        let dir = self.cache_dir.as_ref()?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut hasher);
        Some(dir.join(format!("{digest}-{:016x}.cwasm", hasher.finish())))
    }
}

/// wasmtime 48 has its own error type; at the host's edges it becomes an anyhow error.
fn wasm_error(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}

fn write_cache(path: &Path, component: &Component) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Write then rename, so a concurrent host never reads half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, component.serialize().map_err(wasm_error)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// A plugin file's bytes, read once, and their SHA-256.
pub struct PluginFile {
    pub path: PathBuf,
    bytes: Vec<u8>,
    pub digest: String,
}

impl PluginFile {
    pub fn read(path: &Path) -> Result<PluginFile, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { file: path.display().to_string(), source })?;
        let digest = hex::encode(Sha256::digest(&bytes));
        Ok(PluginFile { path: path.to_owned(), bytes, digest })
    }
}

/// One loaded plugin: a compiled component, ready to instantiate, and its task.
pub struct Plugin {
    runtime: Arc<Runtime>,
    pre: Pre,
    pub path: PathBuf,
    /// SHA-256 of the `.wasm` file, recorded on every job it completes.
    pub digest: String,
    pub spec: TaskSpec,
    /// The database role its statements run under; none while `describe()` runs.
    role: Option<Arc<crate::access::Role>>,
    /// The stored schedule, as the scheduler last read it (None: as declared).
    applied: arc_swap::ArcSwapOption<crate::task::Applied>,
    /// The values `config.get` answers with (declared defaults and the operator's).
    settings: arc_swap::ArcSwap<Settings>,
    /// Not served here for now: its applied settings hold a secret this host lacks.
    suspended: std::sync::atomic::AtomicBool,
    /// How many times it was suspended or resumed: workers recompute the tasks they claim
    /// for when the registry's sum moves ([`Registry::suspensions`](super::Registry::suspensions)).
    suspensions: std::sync::atomic::AtomicU64,
    /// Instances kept for its next jobs, when it declares `reuse` (at most [`WARM_KEPT`]).
    warm: std::sync::Mutex<Vec<Warm>>,
}

/// An instance that ran a job and may run the next one of its task ([`TaskSpec::reuse`]),
/// holding nothing of that job's: no connection, no transaction, no deadline.
struct Warm {
    store: Store<HostState>,
    instance: Instance,
    /// Jobs it has run.
    served: u32,
}

/// Warm instances one plugin keeps at most (all of them together: [`Limits::warm`]).
const WARM_KEPT: usize = 8;

impl Drop for Plugin {
    fn drop(&mut self) {
        self.cool();
    }
}

impl Plugin {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The schedule this task runs by: the stored one once the scheduler has read it.
    pub fn applied(&self) -> Arc<crate::task::Applied> {
        if let Some(applied) = self.applied.load_full() {
            return applied;
        }
        // Built once (a job must not clone the schedule), unless the scheduler got there first.
        let declared = Arc::new(crate::task::Applied::declared(&self.spec));
        let before = self.applied.compare_and_swap(&None::<Arc<crate::task::Applied>>, Some(declared.clone()));
        (*before).clone().unwrap_or(declared)
    }

    /// Follow a stored schedule read by the scheduler.
    pub fn follow(&self, applied: crate::task::Applied) {
        self.applied.store(Some(Arc::new(applied)));
        self.cool();
    }

    /// The settings its calls read.
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.load_full()
    }

    /// Give its calls these settings from now on.
    /// Run its statements under `role` rather than the task's own: a dry run's role.
    pub fn run_as(&mut self, role: &str) {
        self.spec.role = role.to_owned();
        self.role = Some(Arc::new(crate::access::Role::new(role, &self.spec.calls)));
    }

    pub fn set_settings(&self, settings: Settings) {
        self.settings.store(Arc::new(settings));
        self.cool();
    }

    /// Drop its warm instances: what they hold was made under settings or a schedule
    /// that changed, or for a task no longer served here.
    fn cool(&self) {
        let dropped = std::mem::take(&mut *self.warm.lock().unwrap_or_else(|e| e.into_inner())).len();
        self.runtime.warm.fetch_sub(dropped, std::sync::atomic::Ordering::AcqRel);
    }

    /// Stop claiming its jobs on this host (logged once, with why).
    pub fn suspend(&self, why: String) {
        self.cool();
        if !self.suspended.swap(true, std::sync::atomic::Ordering::AcqRel) {
            tracing::error!(task = %self.name(), "not served here: {why}");
            self.suspensions.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// Claim its jobs again.
    pub fn resume(&self) {
        if self.suspended.swap(false, std::sync::atomic::Ordering::AcqRel) {
            tracing::info!(task = %self.name(), "served here again: its settings agree with the applied ones");
            self.suspensions.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    pub fn is_suspended(&self) -> bool {
        self.suspended.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many times it was suspended or resumed.
    pub fn suspensions(&self) -> u64 {
        self.suspensions.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The call's session: its connection, deadline, role and result budget.
    fn session(&self, conn: Lent, task: String, deadline: Instant, traced: bool) -> Session {
        let session = Session::new(
            task,
            conn,
            deadline,
            self.runtime.policy.clone(),
            self.role.clone(),
            self.runtime.limits.memory_bytes,
            self.runtime.cancel_tls.clone(),
        );
        if traced {
            session.traced()
        } else {
            session
        }
    }

    /// Give a warm instance's store the next call's state: what it was lent, its log
    /// fields, its business day, the settings as they are now, a new deadline, and an
    /// empty stderr (what earlier jobs wrote is not this one's).
    fn renew(&self, store: &mut Store<HostState>, conn: Lent, fields: CallFields, today: Today) {
        let deadline = Instant::now() + self.spec.timeout;
        let state = store.data_mut();
        state.stderr.clear();
        state.db = self.session(conn, fields.task.clone(), deadline, false);
        state.log = Logger::new(fields);
        state.config = (*self.settings.load_full()).clone();
        state.today = today;
        state.deadline = deadline;
        store.set_epoch_deadline(1);
    }

    fn store(&self, conn: Lent, fields: CallFields, traced: bool, today: Today) -> (Store<HostState>, Instant) {
        let timeout = self.spec.timeout;
        let deadline = Instant::now() + timeout;
        let stderr = super::stderr::Stderr::default();
        // The host's clocks: `SELECT now()` tells a plugin the time anyway, and Date.now() or
        // SystemTime reading 1970 surprised more than it protected. A job's time is its slot.
        let wasi = wasmtime_wasi::WasiCtxBuilder::new().stderr(stderr.clone()).build();
        let state = HostState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryCap { cap: self.runtime.limits.memory_bytes, total: 0 },
            db: self.session(conn, fields.task.clone(), deadline, traced),
            log: Logger::new(fields),
            config: (*self.settings.load_full()).clone(),
            today,
            stderr,
            deadline,
        };
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every tick, a running guest yields its thread to the other tasks (two spinning
        // plugins once froze the host for their whole timeout), then goes on until its
        // deadline.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|store| {
            if Instant::now() >= store.data().deadline {
                return Ok(wasmtime::UpdateDeadline::Interrupt);
            }
            Ok(wasmtime::UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now())))
        });
        (store, deadline)
    }

    async fn instantiate(&self, store: &mut Store<HostState>) -> Result<Instance, CallError> {
        self.pre.instantiate(&mut *store).await.map_err(|e| CallError::Instantiate(format!("{e:#}")))
    }

    async fn describe(&self) -> Result<crate::bindings::exports::almanac::plugin::task::TaskInfo, CallError> {
        let (mut store, _) = self.store(Lent::Nothing, CallFields { plugin: self.path.display().to_string(), ..Default::default() }, false, Today::default());
        let instance = self.instantiate(&mut store).await?;
        let outcome = self.bounded(instance.describe(&mut store)).await;
        finish(&store, outcome.map(|r| r.map(Ok)), self.spec.timeout, self.runtime.limits.memory_bytes).result
    }

    /// Run one job inside the transaction open on `conn`, a session of the plugin's login.
    pub async fn run(&self, conn: &Arc<Conn>, job: &Job) -> Called<()> {
        self.run_lent(Lent::Conn(conn.clone()), job, false).await.0
    }

    /// [`Plugin::run`], keeping every statement the call sent (a dry run).
    pub async fn run_traced(&self, conn: &Arc<Conn>, job: &Job) -> (Called<()>, Trace) {
        self.run_lent(Lent::Conn(conn.clone()), job, true).await
    }

    /// Run one job against a [`Lent::Noop`] transaction: the host's cost alone.
    pub async fn run_noop(&self, job: &Job) -> Result<(), CallError> {
        self.run_lent(Lent::Noop, job, false).await.0.result
    }

    async fn run_lent(&self, lent: Lent, job: &Job, traced: bool) -> (Called<()>, Trace) {
        let fields = CallFields { plugin: self.spec.name.clone(), task: job.task.clone(), slot: job.slot.label.clone(), key: job.key.clone() };
        let today = Today::new(self.applied(), micros(job.slot.start));
        // A dry run always gets a fresh instance: what it shows is what a job does alone.
        let reuse = self.spec.reuse > 1 && !traced;
        let warm = if reuse { self.warm.lock().unwrap_or_else(|e| e.into_inner()).pop() } else { None };
        if warm.is_some() {
            self.runtime.warm.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
        let (mut store, instance, served) = match warm {
            Some(mut warm) => {
                self.renew(&mut warm.store, lent, fields, today);
                (warm.store, warm.instance, warm.served)
            }
            None => {
                let (mut store, _) = self.store(lent, fields, traced, today);
                match self.instantiate(&mut store).await {
                    Ok(instance) => (store, instance, 0),
                    Err(e) => return (Called { result: Err(e), ending: Ending::default() }, Trace::default()),
                }
            }
        };
        let (tx, owned) = match lend(&mut store) {
            Ok(lent) => lent,
            Err(e) => return (Called { result: Err(e), ending: Ending::default() }, Trace::default()),
        };
        let outcome = self.bounded(instance.run(&mut store, job, tx)).await;
        let called = finish(&store, outcome, self.spec.timeout, self.runtime.limits.memory_bytes);
        let trace = store.data_mut().db.take_trace();
        // Kept only after a job that succeeded, while it has jobs left and its memory is
        // under half the cap; it keeps nothing of the job's: its session is emptied and
        // the transaction it was lent is gone.
        let served = served + 1;
        if reuse && called.result.is_ok() && served < self.spec.reuse && store.data().limiter.total <= self.runtime.limits.memory_bytes / 2 {
            let deadline = Instant::now();
            let state = store.data_mut();
            state.db = self.session(Lent::Nothing, String::new(), deadline, false);
            if state.table.delete(owned).is_ok() {
                let mut kept = self.warm.lock().unwrap_or_else(|e| e.into_inner());
                let budget = self.runtime.limits.warm as usize;
                if kept.len() < WARM_KEPT && self.runtime.warm.fetch_add(1, std::sync::atomic::Ordering::AcqRel) < budget {
                    kept.push(Warm { store, instance, served });
                } else if kept.len() < WARM_KEPT {
                    self.runtime.warm.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                }
            }
        }
        (called, trace)
    }

    /// One page of `plan` inside the transaction open on `conn`.
    pub async fn plan(&self, conn: &Arc<Conn>, slot: &Slot, after: Option<&str>, limit: u32) -> Called<Vec<String>> {
        self.plan_traced(conn, slot, after, limit, false).await.0
    }

    /// [`Plugin::plan`], keeping every statement the call sent when `traced`.
    pub async fn plan_traced(&self, conn: &Arc<Conn>, slot: &Slot, after: Option<&str>, limit: u32, traced: bool) -> (Called<Vec<String>>, Trace) {
        let fields = CallFields { plugin: self.spec.name.clone(), task: self.spec.name.clone(), slot: slot.label.clone(), key: String::new() };
        let today = Today::new(self.applied(), micros(slot.start));
        let (mut store, _) = self.store(Lent::Conn(conn.clone()), fields, traced, today);
        let (instance, tx) = match self.ready(&mut store).await {
            Ok(ready) => ready,
            Err(e) => return (Called { result: Err(e), ending: Ending::default() }, Trace::default()),
        };
        let call = instance.plan(&mut store, slot, tx, after, limit);
        let outcome = self.bounded(call).await;
        let called = finish(&store, outcome, self.spec.timeout, self.runtime.limits.memory_bytes);
        (called, store.data_mut().db.take_trace())
    }

    /// A fresh instance in `store` and the transaction it is lent.
    async fn ready(&self, store: &mut Store<HostState>) -> Result<(Instance, Resource<Transaction>), CallError> {
        let instance = self.instantiate(store).await?;
        Ok((instance, lend(store)?.0))
    }

    /// The epoch deadline stops guest code; this stops a call stuck anywhere else.
    async fn bounded<F: std::future::Future>(&self, call: F) -> Option<F::Output> {
        tokio::time::timeout(self.spec.timeout + HARD_DEADLINE_SLACK, call).await.ok()
    }
}

/// What one call returned, and how it left the connection it was lent.
pub struct Called<T> {
    pub result: Result<T, CallError>,
    pub ending: Ending,
}

/// Lend the call's transaction: the guest receives a borrow, valid for this call only;
/// the host keeps the owned handle, to take it back from a store kept warm.
fn lend(store: &mut Store<HostState>) -> Result<(Resource<Transaction>, Resource<Transaction>), CallError> {
    let owned = store.data_mut().table.push(Transaction).map_err(|e| CallError::Instantiate(e.to_string()))?;
    Ok((Resource::new_borrow(owned.rep()), owned))
}

/// Turn what a call returned into the job's verdict.
fn finish<T>(store: &Store<HostState>, outcome: Option<wasmtime::Result<Result<T, TaskError>>>, timeout: Duration, memory: usize) -> Called<T> {
    let state = store.data();
    let ending = state.db.ending().clone();
    let result = verdict(state, &ending, outcome, timeout, memory);
    Called { result, ending }
}

fn verdict<T>(
    state: &HostState,
    ending: &Ending,
    outcome: Option<wasmtime::Result<Result<T, TaskError>>>,
    timeout: Duration,
    memory: usize,
) -> Result<T, CallError> {
    use crate::text::{clip, MAX_ERROR};
    if ending.broken {
        return Err(CallError::ConnectionLost(ending.failure.as_ref().map_or_else(|| "the connection did not answer a cancel".into(), |f| f.message.clone())));
    }
    let Some(outcome) = outcome else {
        return Err(CallError::ConnectionLost(format!("the call did not return within {:?}", timeout + HARD_DEADLINE_SLACK)));
    };
    let db_failure = ending.failure.clone().map(|f| CallError::Db { sqlstate: f.sqlstate, message: f.message, retryable: f.retryable });
    match outcome {
        Err(trap) => {
            if ending.deadline_hit || matches!(trap.downcast_ref::<wasmtime::Trap>(), Some(wasmtime::Trap::Interrupt)) {
                Err(CallError::Deadline { timeout, cancelled: ending.deadline_hit })
            } else if trap.downcast_ref::<MemoryExceeded>().is_some() {
                Err(CallError::Memory(memory))
            } else {
                let stderr = String::from_utf8_lossy(&state.stderr.contents())
                    .lines()
                    .filter(|l| !l.starts_with("note: run with `RUST_BACKTRACE=1`"))
                    .flat_map(str::split_whitespace)
                    .collect::<Vec<_>>()
                    .join(" ");
                // The trap's own message ("wasm trap: ..."), without the wasm backtrace.
                let trap = match trap.downcast_ref::<wasmtime::Trap>() {
                    Some(code) => code.to_string(),
                    None => format!("plugin trapped: {}", format!("{trap}").lines().next().unwrap_or_default()),
                };
                let message = if stderr.is_empty() { trap } else { format!("{trap}; plugin stderr: {stderr}") };
                Err(CallError::Trap(clip(message, MAX_ERROR)))
            }
        }
        Ok(result) => {
            // A database error the plugin swallowed still aborted the transaction.
            if let Some(failure) = db_failure {
                return Err(failure);
            }
            result.map_err(|e| CallError::Task { message: clip(e.message, MAX_ERROR), retryable: e.retryable })
        }
    }
}

/// A WIT instant (microseconds since the epoch).
fn micros(t: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_micros(t).unwrap_or_default()
}
