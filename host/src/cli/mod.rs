//! Command-line interface: parse, set up logging, pick the database, dispatch.
mod bench;
mod business;
mod changes;
mod clients;
mod cluster;
mod database;
mod demo;
mod dryrun;
mod enqueue;
mod grants;
mod jobs;
mod logins;
mod new;
mod outbox;
mod plugins;
#[cfg(test)]
mod reference;
mod resume;
mod run;
mod schedule;
mod status;
mod tokens;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

use database::Database;

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
    Run(run::RunArgs),
    /// Per task: cursor, next slot, job and outbox counts, last error; each outbox topic
    /// in trouble and each refused deploy. Exits 1 if any job failed, any outbox message is
    /// dead, a topic's circuit is open, a message has waited longer than --outbox-max-age,
    /// a running host refuses a plugin file, a task is held for crashing the server, or a
    /// task that expects jobs had a period whose plan returned none.
    Status(status::StatusArgs),
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
    Enqueue(enqueue::EnqueueArgs),
    /// List outbox messages, newest first; `outbox retry` sends dead ones back.
    Outbox(outbox::OutboxArgs),
    /// The deliberate changes, newest first: who applied, paused, held, retried,
    /// discarded, enqueued or recalled what, from where, and why (almanac.changes).
    Changes(changes::ChangesArgs),
    /// The SQL each owner of the database's tables runs so that the host's role can serve
    /// the plugins of a folder (tables, sequences, schemas WITH GRANT OPTION), with why.
    Grants(grants::GrantsArgs),
    /// The plugins the hosts installed here, and the functions each declares it calls.
    Plugins,
    /// The plugins' database logins; `logins rotate [TASK]` gives them new passwords.
    Logins(logins::LoginsArgs),
    /// Who may sign in to the console of `run --listen` and call its JSON API:
    /// `token create --name NAME --role ROLE`, `token list`, `token revoke NAME`.
    Token(tokens::TokenArgs),
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
        /// List the periods a resume (or a host coming back) would generate now, and those
        /// the catch-up policy would skip; change nothing.
        #[arg(long, conflicts_with = "reason")]
        dry_run: bool,
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

/// What a command that selects (jobs, messages) prints and exits with: a selector that
/// matched nothing exits 1, so that in an incident "0 discarded" is not read as done.
fn matched(n: u64, done: String, none: impl FnOnce() -> String) -> ExitCode {
    if n > 0 {
        println!("{done}");
        ExitCode::SUCCESS
    } else {
        eprintln!("error: {}", none());
        ExitCode::FAILURE
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
        Command::Status(args) => return status::run(&almanac_db().await?, args).await,
        Command::Enqueue(args) => return enqueue::run(&almanac_db().await?, args).await,
        Command::Migrate { to } => {
            // Migrating holds a lock for its whole length: never through a transaction pooler.
            let database = match (cli.pooler, &cli.direct_url) {
                (false, _) => almanac_db().await?,
                (true, Some(direct)) => Database::direct(direct),
                (true, None) => anyhow::bail!(
                    "almanac migrate needs a session, which a transaction pooler does not give: give --direct-url, or run it without --pooler against PostgreSQL itself"
                ),
            };
            let applied = almanac::migrate::run_to(&database.target()?, to).await?;
            println!("{} migration(s) applied", applied.len());
        }
        Command::Run(args) => return run::run(args, &cli.data_dir, almanac_db(), cli.pooler, cli.direct_url.clone(), shutdown).await,
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
        Command::Changes(args) => return changes::run(&almanac_db().await?, args).await,
        Command::Grants(args) => return grants::run(&almanac_db().await?, &cli.data_dir, args).await,
        Command::Plugins => return plugins::run(&almanac_db().await?).await,
        Command::Logins(args) => {
            let database = almanac_db().await?;
            return logins::run(&database, args).await;
        }
        Command::Token(args) => return tokens::run(&almanac_db().await?, args).await,
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
        Command::Resume { task, reason, dry_run } => {
            let database = almanac_db().await?;
            if dry_run {
                return resume::preview(&database, &task).await;
            }
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
        Command::Bench(args) => return bench::run(&cli.data_dir, args, shutdown).await,
        Command::New(args) => return new::run(args),
        Command::Try(args) => {
            let database = almanac_db().await?;
            return dryrun::run(&database, &cli.data_dir, args).await;
        }
        Command::Plan(args) => {
            let database = almanac_db().await?;
            return dryrun::plan(&database, &cli.data_dir, args).await;
        }
        Command::Psql { args } => return cluster::psql(&almanac_db().await?, &args),
        Command::Url => return cluster::url(&almanac_db().await?),
        Command::Stop => return cluster::stop(&cli.data_dir),
        Command::Scratch { name } => return dryrun::scratch(&cli.data_dir, &name).await,
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
