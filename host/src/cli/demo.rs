//! `almanac demo`: the seed's scenario on a real database with the real plugin.
//! 1,000 accounts, the daily-points task, a host that was down for three days; run
//! until the backlog is drained, then show each day's result and check every account
//! got exactly its points once per day.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use almanac::{demo, executor, host, scheduler};

const TASK: &str = "daily-points";

#[derive(clap::Args, Clone)]
pub struct DemoArgs {
    /// Folder holding daily_points.wasm.
    #[arg(long)]
    plugins: PathBuf,
    /// Accounts to seed.
    #[arg(long, default_value_t = 1000)]
    accounts: i64,
    /// Days the host was "down".
    #[arg(long, default_value_t = 3)]
    days: usize,
    #[arg(long, default_value_t = 4)]
    workers: usize,
    #[arg(long, default_value_t = 32)]
    batch: usize,
}

pub async fn run(database: &super::database::Database, data_dir: &Path, args: DemoArgs, shutdown: CancellationToken) -> anyhow::Result<ExitCode> {
    let options = host::Options {
        executor: executor::Options { workers: args.workers, batch: args.batch, poll_interval: Duration::from_millis(200), ..executor::Options::default() },
        scheduler: scheduler::Options { tick: Duration::from_millis(200), ..scheduler::Options::default() },
        shutdown_grace: Duration::from_secs(10),
        pooled: database.pooled,
        ..host::Options::new(args.plugins.clone(), data_dir)
    };
    println!("== Almanac demo: {} accounts, task {TASK}, a {}-day outage", args.accounts, args.days);
    // The business table comes first: daily-points declares it, and the host grants the
    // plugin's role on it when it loads the plugin.
    seed_accounts(database, args.accounts).await?;
    let host = host::Host::start(&database.url, options, &shutdown).await?;
    let Some(plugin) = host.registry().get(TASK).cloned() else {
        bail!("{TASK} is not among the loaded plugins in {}", args.plugins.display());
    };
    let conn = host.pool.get().await?;
    demo::reset(&conn).await.context("resetting the demo tables")?;

    // The outage: the cursor is put back as if the last host stopped `days` slots ago.
    let Some(schedule) = &plugin.spec.schedule else {
        bail!("{TASK} runs on demand: the demo needs its schedule");
    };
    let now: DateTime<Utc> = almanac::db::server_now(&conn).await?;
    let recent: Vec<_> = schedule.slots_after(now - chrono::Duration::days(args.days as i64 + 2)).take_while(|s| s.start <= now).collect();
    if recent.len() <= args.days {
        bail!("the schedule {} has fewer than {} slots in the last days", schedule.cron(), args.days + 1);
    }
    let missed = &recent[recent.len() - args.days..];
    let cursor = recent[recent.len() - args.days - 1].start;
    let origin = scheduler::applied::origin("demo");
    scheduler::operate::set_cursor(&conn, TASK, cursor, &origin, Some("the demo's simulated outage")).await?;
    println!(
        "   schedule: `{}` in {}; the host was last up at {}; missed: {}",
        schedule.cron(),
        schedule.zone(),
        cursor.with_timezone(&schedule.zone()).format("%Y-%m-%d %H:%M %Z"),
        missed.iter().map(|s| s.label.as_str()).collect::<Vec<_>>().join(", ")
    );

    let started = Instant::now();
    let serving = tokio::spawn(host.serve(shutdown.clone()));
    let expected = args.accounts * args.days as i64;
    let through = missed[missed.len() - 1].start;
    loop {
        let (done, open, cursor) = demo::progress(&conn, TASK).await?;
        if cursor >= through && open == 0 && done >= expected {
            break;
        }
        if shutdown.is_cancelled() {
            bail!("interrupted");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    shutdown.cancel();
    serving.await??;

    println!("   caught up in {:.2} s ({:.0} jobs/s)\n", elapsed.as_secs_f64(), expected as f64 / elapsed.as_secs_f64());
    println!("   {:<12} {:<22} {:>6} {:>8} {:>8}", "DAY", "SLOT START (UTC)", "JOBS", "LEDGER", "POINTS");
    for day in demo::days(&conn, TASK).await? {
        println!("   {:<12} {:<22} {:>6} {:>8} {:>8}", day.period, day.slot.format("%Y-%m-%d %H:%M"), day.jobs, day.ledger, day.points);
    }

    // A duplicate trigger for the first missed day, an hour after it ran, as a schedule
    // moved to 01:00 would ask for it.
    let again = demo::retrigger(&conn, TASK, missed[0].start + chrono::Duration::hours(1)).await?;
    println!(
        "\n   re-triggering {} an hour later (as if the schedule had moved): {again} new jobs (the identity (task, period, key) already exists)",
        missed[0].label
    );

    let want = 10 * args.days as i64;
    let (wrong, ledger) = demo::verdict(&conn, want).await?;
    if wrong != 0 || ledger != expected {
        println!("   FAILED: {wrong} accounts do not have exactly {want} points; ledger has {ledger} rows, expected {expected}");
        return Ok(ExitCode::FAILURE);
    }
    println!("   every one of {} accounts has exactly +{want} points; the ledger has {ledger} rows", args.accounts);
    if database.private {
        println!(
            "\n   The private PostgreSQL under {} keeps running for the next command (`almanac --data-dir {} psql` to look around); \
             `almanac --data-dir {} stop` stops it.",
            data_dir.join("pg").display(),
            data_dir.display(),
            data_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Start from a clean slate for the demo's tables and task.
async fn seed_accounts(database: &super::database::Database, accounts: i64) -> anyhow::Result<()> {
    let (conn, _connection) = database.connect().await?;
    demo::seed_accounts(&conn, accounts).await.context("creating the demo's accounts")?;
    Ok(())
}
