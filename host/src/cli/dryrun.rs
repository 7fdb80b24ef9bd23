//! `almanac try` and `almanac plan`: a plugin's `run` or `plan` against the database,
//! rolled back unless `--commit`, with every statement it sent.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use almanac::capability::db::Who;
use almanac::dryrun::{self, Tried};
use almanac::{db, plugin};

/// Where the plugin comes from, and what the call may keep.
#[derive(clap::Args)]
pub struct Source {
    /// The task.
    task: String,
    /// The slot: RFC 3339, a slot label, UTC as `almanac jobs` prints it, or a date.
    #[arg(long)]
    slot: String,
    /// Folder of plugin components, or one component file.
    #[arg(long)]
    plugins: PathBuf,
    /// Per-task overrides and settings [default: ./almanac.toml if it exists].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Keep what the call wrote (and the plugin's role, setup and grants); without it
    /// the transaction is rolled back and nothing is left behind.
    #[arg(long)]
    commit: bool,
}

#[derive(clap::Args)]
pub struct TryArgs {
    #[command(flatten)]
    source: Source,
    /// The job's key.
    #[arg(long)]
    key: String,
    /// JSON handed to the job as its payload.
    #[arg(long)]
    payload: Option<String>,
}

#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    source: Source,
    /// Keys asked for at most.
    #[arg(long, default_value_t = 100)]
    limit: u32,
}

pub async fn run(database: &super::database::Database, data_dir: &std::path::Path, args: TryArgs) -> anyhow::Result<ExitCode> {
    if let Some(payload) = &args.payload {
        serde_json::from_str::<serde_json::Value>(payload).context("--payload is not JSON")?;
    }
    let (pool, logins, runtime, plugin, slot) = prepare(database, data_dir, &args.source).await?;
    let tried = dryrun::run((&pool, &logins), &runtime, &plugin, slot, &args.key, args.payload.clone(), args.source.commit).await?;
    println!("try {} slot {} key {:?}", plugin.name(), slot.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true), args.key);
    Ok(report(&tried, None))
}

pub async fn plan(database: &super::database::Database, data_dir: &std::path::Path, args: PlanArgs) -> anyhow::Result<ExitCode> {
    let (pool, logins, runtime, plugin, slot) = prepare(database, data_dir, &args.source).await?;
    // Its `plan` is never called: an empty list of keys would say the wrong thing.
    if plugin.spec.schedule.is_none() {
        anyhow::bail!(
            "task {name:?} runs on demand: it has no schedule, so nothing plans its jobs; they come from enqueues \
             (almanac enqueue, or almanac.enqueue from your application). Try one job with: almanac try {name} --key KEY",
            name = plugin.name()
        );
    }
    let tried = dryrun::plan((&pool, &logins), &runtime, &plugin, slot, args.limit, args.source.commit).await?;
    println!("plan {} slot {} (at most {} keys)", plugin.name(), slot.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true), args.limit);
    let code = report(&tried, Some(args.limit));
    // The tasks it comes after, and whether this period's jobs would wait for them now.
    let conn = pool.get().await?;
    if let Some(stored) = almanac::scheduler::operate::schedule_of(&**conn, plugin.name()).await?.filter(|s| !s.after.is_empty()) {
        let period = plugin.applied().period_label(slot);
        let waiting = !almanac::scheduler::operate::unsettled(&**conn, &stored.after, std::slice::from_ref(&period)).await?.is_empty();
        let now = if waiting { "its jobs would wait: not all of them have settled it yet" } else { "they have settled it: its jobs would run" };
        println!("runs after {} in period {period}: {now}", stored.after.join(", "));
    }
    Ok(code)
}

pub async fn scratch(data_dir: &std::path::Path, name: &str) -> anyhow::Result<ExitCode> {
    let pg_dir = data_dir.join("pg");
    let cluster = tokio::task::spawn_blocking(move || almanac::cluster::Cluster::ensure(&pg_dir, &almanac::cluster::Settings::default()))
        .await?
        .context("cannot start the private PostgreSQL cluster")?;
    let url = cluster.provision_fresh(name).await?;
    almanac::migrate::run(&super::database::Database::direct(&url).target()?).await?;
    println!("{url}");
    Ok(ExitCode::SUCCESS)
}

type Prepared = (almanac::db::Pool, std::sync::Arc<almanac::login::Logins>, std::sync::Arc<plugin::Runtime>, plugin::Plugin, chrono::DateTime<chrono::Utc>);

async fn prepare(database: &super::database::Database, data_dir: &std::path::Path, source: &Source) -> anyhow::Result<Prepared> {
    let target = database.target()?;
    // The host's connection, the setup lock's, and one to spare.
    let pool = db::Pool::new(&target, 3)?;
    // A dry run works on any database: one Almanac never ran on is migrated first.
    if !database.pooled {
        let applied = almanac::migrate::run(&target).await?;
        if !applied.is_empty() {
            eprintln!("migrated the database first ({} migrations): a dry run needs Almanac's tables", applied.len());
        }
    }
    let logins = almanac::login::Logins::new(&target, pool.clone(), 1);
    let database = almanac::db::database_name(&**pool.get().await?).await?;
    let runtime = plugin::Runtime::new(plugin::Limits::default(), Some(data_dir.join("cache")), target.tls.clone(), &database)?;
    let config = source.config.clone().or_else(|| Some(almanac::config::default_path()).filter(|p| p.exists()));
    let plugin = dryrun::load(&runtime, &source.plugins, config.as_deref(), &source.task).await?;
    let slot = super::database::parse_slot(plugin.spec.schedule.as_ref(), &source.slot).context("--slot")?;
    Ok((pool, logins, runtime, plugin, slot))
}

/// Print what the call did; exit 1 if it failed.
fn report(tried: &Tried, plan_limit: Option<u32>) -> ExitCode {
    for (n, s) in tried.trace.statements.iter().enumerate() {
        let (who, sql, params) = match (s.who, s.params.as_slice()) {
            // The message as the receiver would get it, not the host's statement.
            (Who::Host, [topic, key, payload, content_type]) => ("outbox", format!("publish on {topic} key {key} as {content_type}:"), format!(" {payload}")),
            // A job of another task (WIT `jobs.enqueue`), by its identity.
            (Who::Host, [task, slot, key, payload, run_after]) => (
                "jobs",
                format!("enqueue {task} slot {slot} key {key}"),
                [("payload", payload), ("run after", run_after)].iter().filter(|(_, v)| *v != "NULL").map(|(name, v)| format!(" {name} {v}")).collect(),
            ),
            (who, params) => (
                if who == Who::Plugin { "plugin" } else { "outbox" },
                s.sql.split_whitespace().collect::<Vec<_>>().join(" "),
                if params.is_empty() { String::new() } else { format!("  [{}]", params.join(", ")) },
            ),
        };
        println!("  {:>3} {who:<6} {sql}{params}\n      -> {} ({:.1} ms)", n + 1, s.outcome, s.elapsed.as_secs_f64() * 1000.0);
    }
    if tried.trace.untraced > 0 {
        println!("  ... and {} more statement(s), not shown (a dry run keeps the first {})", tried.trace.untraced, almanac::capability::db::TRACE_KEPT);
    }
    let ms = tried.elapsed.as_secs_f64() * 1000.0;
    let kept = if tried.committed { "committed" } else { "rolled back: nothing was kept (give --commit to keep it)" };
    let code = match &tried.outcome {
        Ok(keys) if plan_limit.is_some() => {
            // One a line, so a key with a comma in it reads (and parses) as one key.
            println!("keys ({}):", keys.len());
            for key in keys {
                println!("  key: {key}");
            }
            println!("outcome: ok in {ms:.1} ms; {kept}");
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!("outcome: ok (the job would be done) in {ms:.1} ms; {kept}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("outcome: failed in {ms:.1} ms: {e}; rolled back: nothing was kept");
            ExitCode::from(1)
        }
    };
    println!("ran as role {}, made for this dry run and dropped after it (the task's live role was not touched)", tried.role);
    for call in &tried.calls {
        println!("declared call {}", almanac::text::printable(&call.describe()));
    }
    code
}
