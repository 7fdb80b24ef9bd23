//! Command-line interface: parse, set up logging, pick the database, dispatch.
mod bench;
mod clients;
mod demo;
mod dryrun;
mod jobs;
mod logins;
mod new;
mod outbox;
#[cfg(test)]
mod reference;
mod schedule;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

use almanac::cluster::{Cluster, Settings};
use almanac::{db, executor, host, plugin, scheduler, status};

#[derive(Parser)]
#[command(name = "almanac", version, about = "Calendar jobs on PostgreSQL, exactly once in effect")]
struct Cli {
    /// PostgreSQL connection string (URL or key=value, as libpq takes them). When unset,
    /// libpq's PGHOST/PGDATABASE/... variables if they name a server, else a private
    /// cluster under --data-dir with the system's PostgreSQL binaries.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    /// DATABASE_URL leads to a connection pooler in transaction mode (PgBouncer and the
    /// like): no statement is kept prepared and no session setting is made.
    #[arg(long, env = "ALMANAC_POOLER", global = true)]
    pooler: bool,
    /// With --pooler: a connection string straight to PostgreSQL, for what needs a
    /// session (LISTEN wake-ups, migrations). Without it, idle hosts poll.
    #[arg(long, env = "ALMANAC_DIRECT_URL", global = true, hide_env_values = true)]
    direct_url: Option<String>,
    /// Where the private cluster and the compiled-plugin cache live.
    #[arg(long, default_value = ".almanac", global = true)]
    data_dir: PathBuf,
    /// Async runtime threads [default: one per CPU].
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

// Parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Apply pending migrations and exit.
    Migrate {
        /// Stop after this migration (to test an upgrade from an older schema).
        #[arg(long, hide = true)]
        to: Option<u32>,
    },
    /// Load the plugins in a folder and run their schedules and jobs until SIGTERM.
    Run(RunArgs),
    /// Per task: cursor, next slot, job and outbox counts, last error. Exits 1 if any job
    /// failed or any outbox message is dead.
    Status {
        /// One JSON object per task, one per line.
        #[arg(long)]
        json: bool,
    },
    /// List jobs, newest first, with attempts and last error.
    Jobs(jobs::JobsArgs),
    /// Send failed jobs back to pending (their attempt history is kept).
    Retry(jobs::RetryArgs),
    /// Mark pending or failed jobs as never to run (kept as evidence, recorded).
    Discard(jobs::DiscardArgs),
    /// Delete done jobs older than a duration; refused inside any task's backfill horizon.
    Prune {
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: Duration,
    },
    /// Insert one job by identity (a no-op if it exists).
    Enqueue {
        task: String,
        /// The slot: RFC 3339, a slot label, UTC as `almanac jobs` prints it, or a date
        /// (that day's slot of a daily schedule).
        #[arg(long)]
        slot: String,
        #[arg(long)]
        key: String,
        /// JSON handed to the job as its payload.
        #[arg(long)]
        payload: Option<String>,
        /// Enqueue a slot that is not on the task's calendar (refused otherwise).
        #[arg(long)]
        off_calendar: bool,
    },
    /// List outbox messages, newest first; `outbox retry` sends dead ones back.
    Outbox(outbox::OutboxArgs),
    /// The plugins' database logins; `logins rotate [TASK]` gives them new passwords.
    Logins(logins::LoginsArgs),
    /// Which roles may enqueue into which tasks; `clients allow ROLE TASK`, `clients revoke ROLE TASK`.
    Clients(clients::ClientsArgs),
    /// Preview a schedule's slots in local and UTC time.
    Slots(schedule::SlotsArgs),
    /// Every schedule: cursor, next slot, catch-up policy, paused.
    Schedules {
        #[arg(long)]
        json: bool,
    },
    /// Make the plugins' schedules, as almanac.toml adjusts them, the ones every host
    /// runs by (recorded; running hosts follow on their next tick).
    Apply(schedule::ApplyArgs),
    /// Move TASK's cursor: where its schedule resumes generating (recorded).
    Cursor(schedule::CursorArgs),
    /// Stop running TASK's jobs on every host from the next claim on, scheduled or on
    /// demand: they wait pending, jobs running now finish (recorded).
    Hold {
        task: String,
        /// Why, recorded with the change.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Let a held TASK's jobs run again (recorded).
    Release {
        task: String,
        /// Why, recorded with the change.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Stop generating new slots for TASK; jobs already generated or enqueued still run
    /// (`hold` stops those; recorded).
    Pause {
        task: String,
        /// Why, recorded with the change.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Generate TASK's slots again, catching up per its policy (recorded).
    Resume {
        task: String,
        /// Why, recorded with the change.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Delete TASK's schedule for good (recorded); its done jobs stay as evidence.
    Forget(schedule::ForgetArgs),
    /// Generate every slot of TASK in a range (idempotent).
    Backfill(schedule::BackfillArgs),
    /// Make a plugin project (Rust or Python) that builds as it is.
    New(new::NewArgs),
    /// Run one job of a plugin against the database and show every statement it sent;
    /// rolled back unless --commit.
    Try(dryrun::TryArgs),
    /// Ask a plugin for a slot's keys against the database, showing every statement;
    /// rolled back unless --commit.
    Plan(dryrun::PlanArgs),
    /// Measure Almanac next to the physical limit (floor) on a private cluster.
    Bench(bench::BenchArgs),
    /// The seed's scenario end to end: 1,000 accounts, a three-day outage, catch-up.
    Demo(demo::DemoArgs),
    /// psql on database `almanac` (of DATABASE_URL, or the private cluster, started if
    /// needed); arguments after `--` go to psql.
    Psql {
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Print the connection string of database `almanac` (DATABASE_URL's, its password
    /// hidden, or the private cluster's, started if needed): what an application or psql
    /// connects with.
    Url,
    /// Stop the private cluster under --data-dir (a fast shutdown), if it runs.
    Stop,
    /// Make database NAME in the private cluster under --data-dir anew (dropped first if
    /// it exists), migrated, and print its connection string: a clean database for a
    /// plugin's tests. DATABASE_URL is not used.
    Scratch { name: String },
}

#[derive(clap::Args, Clone)]
// A later occurrence of an option wins, so wrappers can set defaults and callers override.
#[command(args_override_self = true)]
struct RunArgs {
    /// Folder of plugin components (`*.wasm`).
    #[arg(long)]
    plugins: PathBuf,
    /// Per-task overrides [default: ./almanac.toml if it exists].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Concurrent workers, each with its own connection.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Jobs claimed per transaction (1 = one job per transaction).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1000))]
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
    /// has ended this many times before the job did.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..))]
    poison_after: i32,
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
    /// Idle polling interval (notifications wake workers sooner).
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

    fn host_options(&self, data_dir: &std::path::Path) -> host::Options {
        host::Options {
            plugins_dir: self.plugins.clone(),
            config: self.config.clone().or_else(|| Some(almanac::config::default_path()).filter(|p| p.exists())),
            cache_dir: Some(self.cache_dir.clone().unwrap_or_else(|| data_dir.join("cache"))),
            limits: plugin::Limits {
                memory_bytes: self.memory_limit_mib << 20,
                instances: (self.workers as u32) * 2 + 8,
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

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format, matches!(cli.command, Command::Demo(_) | Command::Bench(_)));
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.threads {
        builder.worker_threads(n.max(1));
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    };
    // Work abandoned at the end of the grace period may still hold a thread (a plugin
    // between two deadline checks, a blocking compile): exit anyway, the database rolls
    // back whatever it left open.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

fn init_logging(format: LogFormat, quiet: bool) {
    // Server NOTICEs ("relation already exists, skipping") and the migration runner's
    // chatter are not worth an operator's attention.
    let default = if quiet { "warn" } else { "info,tokio_postgres=warn,refinery_core=warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        // Event fields at the top level; the job's span (task, slot, key, attempt) under
        // "span", so every line about a job can be found by its identity.
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).init(),
    }
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let shutdown = CancellationToken::new();
    spawn_signal_handler(shutdown.clone());
    // Most commands work on database `almanac` (of DATABASE_URL, or the private cluster).
    let almanac_db = || Database::of(cli.database_url.clone(), &cli.data_dir, "almanac", cli.pooler);
    match cli.command {
        Command::Migrate { to } => {
            // Migrating holds a session's advisory lock: never through a transaction pooler.
            let database = match (cli.pooler, &cli.direct_url) {
                (false, _) => almanac_db().await?,
                (true, Some(direct)) => Database::direct(direct),
                (true, None) => anyhow::bail!(
                    "almanac migrate needs a session, which a transaction pooler does not give: give --direct-url, or run it without --pooler against PostgreSQL itself"
                ),
            };
            let (mut client, _conn) = database.connect().await?;
            let applied = almanac::migrate::run_to(&mut client, to).await?;
            println!("{} migration(s) applied", applied.len());
        }
        Command::Run(args) => {
            let mut options = args.host_options(&cli.data_dir);
            options.pooled = cli.pooler;
            options.direct_url = cli.direct_url.clone();
            let observed = almanac::http::Observed::new(options.metrics.clone());
            if let Some(addr) = args.listen {
                almanac::http::bind(addr, observed.clone(), shutdown.clone()).await?;
            }
            let database = almanac_db().await?;
            let host = host::Host::start_retrying(&database.url, options, &shutdown).await?;
            if args.listen.is_some() {
                observed.started(host.target(), host.loaded.clone(), host.outbox_topics())?;
            }
            host.outbox_options(args.outbox_options()).serve(shutdown).await?;
        }
        Command::Status { json } => {
            let (client, _conn) = almanac_db().await?.connect().await?;
            let statuses = status::report(&client).await?;
            if json {
                for s in &statuses {
                    println!("{}", serde_json::to_string(s)?);
                }
            } else {
                print!("{}", status::render(&statuses));
                let outside = almanac::history::outside(&client).await?;
                if outside > 0 {
                    println!("history: {outside} job(s) with slots outside the month partitions (more than 5 years back or 2 years ahead) wait in almanac.jobs_default");
                }
            }
            if statuses.iter().any(|s| s.failed > 0 || s.outbox_dead > 0) {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Enqueue { task, slot, key, payload, off_calendar } => {
            let (client, _conn) = almanac_db().await?.connect().await?;
            // A task no host registered would leave an orphan job pending forever.
            let schedule = task_schedule(&client, &task).await?;
            let slot = parse_slot(schedule.as_ref(), &slot).context("--slot")?;
            // On the calendar, or the instant an older calendar keyed a period under (asked
            // of the ledger only for a slot the calendar does not have).
            let off = schedule.as_ref().filter(|s| !off_calendar && !s.is_on_calendar(slot));
            let off = match off {
                Some(s) if !scheduler::operate::is_keyed(&client, &task, slot).await? => Some(s),
                _ => None,
            };
            if let Some(schedule) = off {
                let near: Vec<String> = schedule.slots_after(slot).take(2).map(|s| format!("{} ({})", s.label, s.start.format("%Y-%m-%d %H:%M:%SZ"))).collect();
                anyhow::bail!(
                    "--slot {} is not on {task}'s calendar ({} in {}); the next slots are {}. Give --off-calendar to enqueue it anyway",
                    slot.format("%Y-%m-%d %H:%M:%SZ"),
                    schedule.cron(),
                    schedule.zone(),
                    near.join(", ")
                );
            }
            let payload = payload.map(|p| serde_json::from_str::<serde_json::Value>(&p)).transpose().context("--payload is not JSON")?;
            let new = scheduler::enqueue(&client, &task, slot, &key, payload.as_ref(), true).await.map_err(|e| anyhow::anyhow!(db::error_chain(&e)))?;
            match (new, slot > chrono::Utc::now()) {
                (true, true) => println!("enqueued; it runs from {} (its slot has not started)", slot.format("%Y-%m-%d %H:%M:%SZ")),
                (true, false) => println!("enqueued"),
                (false, _) => println!("already present (no-op)"),
            }
        }
        Command::Jobs(args) => {
            let database = almanac_db().await?;
            return jobs::jobs(&database, args).await;
        }
        Command::Retry(args) => {
            let database = almanac_db().await?;
            return jobs::retry(&database, args).await;
        }
        Command::Discard(args) => {
            let database = almanac_db().await?;
            return jobs::discard(&database, args).await;
        }
        Command::Prune { older_than } => {
            let database = almanac_db().await?;
            return jobs::prune(&database, older_than).await;
        }
        Command::Outbox(args) => {
            let database = almanac_db().await?;
            return outbox::run(&database, args).await;
        }
        Command::Logins(args) => {
            let database = almanac_db().await?;
            return logins::run(&database, args).await;
        }
        Command::Clients(args) => {
            let database = almanac_db().await?;
            return clients::run(&database, args).await;
        }
        Command::Slots(args) => {
            return schedule::slots(cli.database_url, cli.pooler, &cli.data_dir, args).await;
        }
        Command::Schedules { json } => {
            let database = almanac_db().await?;
            return schedule::schedules(&database, json).await;
        }
        Command::Hold { task, reason } => {
            let database = almanac_db().await?;
            return schedule::set_held(&database, &task, true, reason.as_deref()).await;
        }
        Command::Release { task, reason } => {
            let database = almanac_db().await?;
            return schedule::set_held(&database, &task, false, reason.as_deref()).await;
        }
        Command::Pause { task, reason } => {
            let database = almanac_db().await?;
            return schedule::set_paused(&database, &task, true, reason.as_deref()).await;
        }
        Command::Resume { task, reason } => {
            let database = almanac_db().await?;
            return schedule::set_paused(&database, &task, false, reason.as_deref()).await;
        }
        Command::Apply(args) => {
            let database = almanac_db().await?;
            return schedule::apply(&database, &cli.data_dir, args).await;
        }
        Command::Cursor(args) => {
            let database = almanac_db().await?;
            return schedule::cursor(&database, args).await;
        }
        Command::Forget(args) => {
            let database = almanac_db().await?;
            return schedule::forget(&database, args).await;
        }
        Command::Backfill(args) => {
            let database = almanac_db().await?;
            return schedule::backfill(&database, &cli.data_dir, args).await;
        }
        Command::Bench(args) => return bench::run(&cli.data_dir, args).await,
        Command::New(args) => return new::run(args),
        Command::Try(args) => {
            let database = almanac_db().await?;
            return dryrun::run(&database, &cli.data_dir, args).await;
        }
        Command::Plan(args) => {
            let database = almanac_db().await?;
            return dryrun::plan(&database, &cli.data_dir, args).await;
        }
        Command::Psql { args } => {
            return psql(&almanac_db().await?.url, &args);
        }
        Command::Url => {
            println!("{}", db::conninfo::redact(&almanac_db().await?.url));
        }
        Command::Scratch { name } => return dryrun::scratch(&cli.data_dir, &name).await,
        Command::Stop => {
            let cluster = Cluster::new(&cli.data_dir.join("pg"))?;
            if !cluster.data_dir.join("PG_VERSION").exists() || !cluster.is_running() {
                println!("the private cluster under {} is not running", cli.data_dir.display());
            } else {
                tokio::task::block_in_place(|| cluster.stop("fast"))?;
                println!("stopped the private cluster under {}", cli.data_dir.display());
            }
        }
        Command::Demo(args) => {
            let database = Database::of(cli.database_url, &cli.data_dir, "almanac_demo", cli.pooler).await?;
            return demo::run(&database, &cli.data_dir, args, shutdown).await;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn spawn_signal_handler(shutdown: CancellationToken) {
    tokio::spawn(async move {
        let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else { return };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
        }
        shutdown.cancel();
    });
}

/// Run psql on `url` (as libpq reads it, so the same string works), or say how.
fn psql(url: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    let psql = ["/usr/bin/psql", "/usr/local/bin/psql"].into_iter().find(|p| std::path::Path::new(p).exists()).unwrap_or("psql");
    match std::process::Command::new(psql).arg(url).args(args).status() {
        Ok(status) => Ok(ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1))),
        Err(e) => anyhow::bail!("cannot run psql ({e}); install it (Debian: postgresql-client) and run: psql '{}'", db::conninfo::redact(url)),
    }
}

/// Where a command connects: a connection string, and whether it leads through a
/// transaction-pooling pooler (`--pooler`).
pub(crate) struct Database {
    pub url: String,
    pub pooled: bool,
}

impl Database {
    /// `database_url`'s choice, through a pooler if `pooled`.
    pub(crate) async fn of(url: Option<String>, data_dir: &std::path::Path, dbname: &str, pooled: bool) -> anyhow::Result<Database> {
        Ok(Database { url: database_url(url, data_dir, dbname).await?, pooled })
    }

    /// Straight to PostgreSQL.
    pub(crate) fn direct(url: &str) -> Database {
        Database { url: url.to_owned(), pooled: false }
    }

    /// Where the CLI's connections go, as role `cli` in `application_name`.
    pub(crate) fn target(&self) -> anyhow::Result<db::Target> {
        Ok(db::config(&self.url, self.pooled, &db::SessionSettings::default())?.role("cli"))
    }

    /// One connection for one command.
    pub(crate) async fn connect(&self) -> anyhow::Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> {
        let target = self.target()?;
        let (client, connection) = target.connect().await.map_err(|e| anyhow::anyhow!("cannot connect to {}: {}", target.describe(), db::error_chain(&e)))?;
        let handle = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("connection closed: {e}");
            }
        });
        Ok((client, handle))
    }
}

/// The schedule of `task` (None: it runs on demand), or an error naming the tasks there
/// are: a typo must not read as "0 jobs" or enqueue a job no host will ever run.
pub(crate) async fn task_schedule(client: &tokio_postgres::Client, task: &str) -> anyhow::Result<Option<almanac::calendar::Schedule>> {
    match scheduler::operate::schedule_of(client, task).await? {
        Some((Some(cron), zone)) => Ok(Some(almanac::calendar::Schedule::new(&cron, &zone)?)),
        Some((None, _)) => Ok(None),
        None => {
            let known: Vec<String> = scheduler::operate::list(client).await?.into_iter().map(|r| r.task).collect();
            anyhow::bail!("no task {task:?}: no host has registered it (known: {})", known.join(", "))
        }
    }
}

/// A slot as an operator writes it: by the task's schedule, or, on demand, any instant
/// (a date means UTC midnight).
pub(crate) fn parse_slot(schedule: Option<&almanac::calendar::Schedule>, text: &str) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    match schedule {
        Some(schedule) => schedule.parse_slot(text),
        None => almanac::calendar::parse_instant(text, chrono_tz::UTC),
    }
    .map_err(anyhow::Error::msg)
}

/// `DATABASE_URL`; else libpq's `PG*` variables when they name a server (`PGHOST`,
/// `PGHOSTADDR` or `PGDATABASE`); else the private cluster (started if needed) with
/// database `dbname`.
pub(crate) async fn database_url(url: Option<String>, data_dir: &std::path::Path, dbname: &str) -> anyhow::Result<String> {
    if let Some(url) = url.filter(|u| !u.is_empty()) {
        return Ok(url);
    }
    if ["PGHOST", "PGHOSTADDR", "PGDATABASE"].iter().any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())) {
        // An empty connection string: everything comes from the environment.
        return Ok(String::new());
    }
    let pg_dir = data_dir.join("pg");
    let cluster =
        tokio::task::spawn_blocking(move || Cluster::ensure(&pg_dir, &Settings::default())).await?.context("cannot start the private PostgreSQL cluster")?;
    tracing::info!(data = %cluster.data_dir.display(), socket = %cluster.socket_dir.display(), "DATABASE_URL is unset: using the private PostgreSQL cluster");
    let url = cluster.provision(dbname).await?;
    // The private cluster is Almanac's own: its databases hold Almanac's tables from the
    // first command on (`almanac status` on a fresh one failed on a missing table).
    let (mut client, _conn) = Database::direct(&url).connect().await?;
    let applied = almanac::migrate::run_to(&mut client, None).await?;
    if !applied.is_empty() {
        tracing::info!(database = dbname, migrations = applied.len(), "migrated the private cluster's database");
    }
    Ok(url)
}
