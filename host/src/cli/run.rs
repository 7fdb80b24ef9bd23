//! `almanac run`: a host serving the plugins in a folder until SIGTERM.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use almanac::{db, executor, host, plugin, scheduler};

use super::database::Database;

#[derive(clap::Args, Clone)]
// A later occurrence of an option wins, so wrappers can set defaults and callers override.
#[command(args_override_self = true)]
pub struct RunArgs {
    /// Folder of plugin components (`*.wasm`).
    #[arg(long)]
    plugins: PathBuf,
    /// Per-task overrides [default: ./almanac.toml if it exists].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Concurrent workers, each with its own connection.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// The most jobs claimed per transaction. Each worker starts a task at one job and
    /// doubles while its claims come back full and quick, so an idle host claims one job
    /// at a time and a backlog is worked in batches of this size (1 = always one job per
    /// transaction).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1000))]
    batch: u16,
    /// A batch starts no job after running this long: the jobs it claimed and has not
    /// started go back pending, and it commits. Bounds how long a batch holds its locks
    /// and the database's oldest-transaction horizon (VACUUM).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    batch_time: Duration,
    /// Do not apply pending migrations at start.
    #[arg(long)]
    no_migrate: bool,
    /// Serve /metrics (Prometheus), /healthz, /readyz and the dashboard (/) on this
    /// address, e.g. 127.0.0.1:9187.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Who may use the console and the JSON API of --listen: `token` (sign in with a
    /// token from `almanac token create`; Bearer for the API and /metrics), `header`
    /// (an authenticating proxy names the user in --trusted-header) or `none` (anyone
    /// views, a token signs in to act; loopback only) [default: none on a loopback
    /// address, token otherwise].
    #[arg(long, value_enum, value_name = "HOW")]
    sign_in: Option<almanac::http::auth::SignIn>,
    /// The header an authenticating proxy (oauth2-proxy) names the user in, e.g.
    /// X-Forwarded-Email; the user is the token of that name, with its role. Only for a
    /// listener nothing but the proxy can reach.
    #[arg(long, value_name = "NAME")]
    trusted_header: Option<String>,
    /// The console takes no action, whoever asks.
    #[arg(long)]
    read_only: bool,
    /// Load the plugins folder once at start; do not watch it for new or changed files.
    #[arg(long)]
    no_watch: bool,
    /// Compiled-plugin cache [default: DATA_DIR/cache].
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Linear memory limit per plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    memory_limit_mib: usize,
    /// Add a function to the plugins' allowlist (e.g. `pg_sleep`); repeatable. Functions
    /// that run SQL given as text or change the session can never be added.
    #[arg(long = "allow-function", value_name = "NAME")]
    allow_functions: Vec<String>,
    /// Take a function off the plugins' allowlist (`name`, or `prefix*`); repeatable.
    #[arg(long = "deny-function", value_name = "NAME")]
    deny_functions: Vec<String>,
    /// Fail a job without running it again once the host (or connection) running it
    /// has ended this many times before the job did; and hold a task (as `almanac hold`
    /// does) once the database server crashed this many times while its jobs ran,
    /// within --poison-window.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..))]
    poison_after: i32,
    /// The window in which a task's server crashes are counted against --poison-after
    /// (at most a year).
    #[arg(long, default_value = "24h", value_parser = poison_window)]
    poison_window: Duration,
    /// Retry a job this many times after transient database errors (a deadlock, a
    /// serialization failure, a server restart or failover) before failing it; these
    /// are never counted against a task's max_attempts.
    #[arg(long, default_value_t = executor::transient::BUDGET, value_parser = clap::value_parser!(i32).range(0..))]
    transient_retries: i32,
    /// Workers one task's batches may hold at once (default: all but one when the host
    /// serves more than one task, so one task's backlog or slow jobs always leave a
    /// worker for the others; all when it serves one).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    task_workers: Option<u16>,
    /// The longest timeout a plugin may declare; longer ones are cut to this.
    #[arg(long, default_value = "15min", value_parser = humantime::parse_duration)]
    max_timeout: Duration,
    /// First retry delay (doubles per attempt, with jitter).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    retry_base: Duration,
    /// Longest retry delay.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    retry_max: Duration,
    /// Without LISTEN, how often idle workers poll. With it (notifications wake them, and
    /// the next retry's or slot's time is asked), how often a task whose jobs are due but
    /// not claimable is looked at (another host runs them, they wait for `after`).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    poll_interval: Duration,
    /// How often schedules are checked for due slots.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    tick: Duration,
    /// Time in-flight work gets to finish after SIGTERM/SIGINT.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Longest a single statement may run on a host connection.
    #[arg(long, default_value = "5min", value_parser = humantime::parse_duration)]
    statement_timeout: Duration,
    /// Longest a host transaction may sit idle before the server ends it.
    #[arg(long, default_value = "5min", value_parser = humantime::parse_duration)]
    idle_in_transaction_timeout: Duration,
    /// Outbox: idle polling interval (notifications wake the dispatcher sooner).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    outbox_poll_interval: Duration,
    /// Outbox: first retry delay of a failed delivery (doubles per attempt, with jitter).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    outbox_retry_base: Duration,
    /// Outbox: longest retry delay.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    outbox_retry_max: Duration,
    /// Outbox: concurrent dispatch workers (each borrows a connection per round).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    outbox_workers: u16,
    /// Outbox: messages a worker claims per transaction and delivers concurrently.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1000))]
    outbox_batch: u16,
}

impl RunArgs {
    fn outbox_options(&self) -> almanac::outbox::Options {
        almanac::outbox::Options {
            poll_interval: self.outbox_poll_interval,
            retry_base: self.outbox_retry_base,
            retry_max: self.outbox_retry_max,
            workers: usize::from(self.outbox_workers),
            batch: usize::from(self.outbox_batch),
        }
    }

    pub(crate) fn host_options(&self, data_dir: &std::path::Path) -> host::Options {
        host::Options {
            plugins_dir: self.plugins.clone(),
            config: self.config.clone().or_else(|| Some(almanac::config::default_path()).filter(|p| p.exists())),
            cache_dir: Some(self.cache_dir.clone().unwrap_or_else(|| data_dir.join("cache"))),
            limits: plugin::Limits {
                memory_bytes: self.memory_limit_mib << 20,
                instances: (self.workers as u32) * 2 + 8,
                // As many as can run at once: a worker runs one job at a time.
                warm: self.workers as u32,
                allow_functions: self.allow_functions.clone(),
                deny_functions: self.deny_functions.clone(),
                max_timeout: self.max_timeout,
            },
            executor: executor::Options {
                workers: self.workers,
                batch: usize::from(self.batch),
                batch_time: self.batch_time,
                retry_base: self.retry_base,
                retry_max: self.retry_max,
                poll_interval: self.poll_interval,
                poison_after: self.poison_after,
                poison_window: self.poison_window,
                transient_retries: self.transient_retries,
                task_workers: self.task_workers.map(usize::from),
                ..executor::Options::default()
            },
            scheduler: scheduler::Options { tick: self.tick, ..scheduler::Options::default() },
            session: db::SessionSettings { statement_timeout: self.statement_timeout, idle_in_transaction_timeout: self.idle_in_transaction_timeout },
            migrate: !self.no_migrate,
            shutdown_grace: self.shutdown_grace,
            watch: !self.no_watch,
            metrics: Default::default(),
            register_schedules: true,
            pooled: false,
            direct_url: None,
        }
    }
}

/// Serve until `shutdown`; /metrics, /healthz and the dashboard answer (not ready) while
/// the database is resolved and the host starts.
pub async fn run(
    args: RunArgs,
    data_dir: &std::path::Path,
    database: impl std::future::Future<Output = anyhow::Result<Database>>,
    pooled: bool,
    direct_url: Option<String>,
    shutdown: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let mut options = args.host_options(data_dir);
    options.pooled = pooled;
    options.direct_url = direct_url;
    let loopback = args.listen.is_none_or(|a| a.ip().is_loopback());
    let default = if loopback { almanac::http::auth::SignIn::None } else { almanac::http::auth::SignIn::Token };
    let access =
        almanac::http::auth::Access { sign_in: args.sign_in.unwrap_or(default), trusted_header: args.trusted_header.clone(), read_only: args.read_only };
    let observed = almanac::http::Observed::new(options.metrics.clone(), access);
    if let Some(addr) = args.listen {
        almanac::http::bind(addr, observed.clone(), shutdown.clone()).await?;
    }
    let database = database.await?;
    let host = host::Host::start_retrying(&database.url, options, &shutdown).await?;
    if args.listen.is_some() {
        observed.started(
            host.target(),
            almanac::http::Started {
                loaded: host.loaded.clone(),
                topics: host.outbox_topics(),
                logins: host.logins.clone(),
                scheduler: host.scheduler_options(),
            },
        )?;
    }
    host.outbox_options(args.outbox_options()).serve(shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// A duration of at most a year: the sweep subtracts it from now().
fn poison_window(text: &str) -> Result<Duration, String> {
    let window = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if window > Duration::from_secs(366 * 24 * 3600) {
        return Err("at most a year".into());
    }
    Ok(window)
}
