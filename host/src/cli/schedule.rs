//! The calendar commands: `slots` (preview), `schedules`, `pause`/`resume`, `backfill`.
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use serde::Serialize;

use almanac::calendar::Schedule;
use almanac::calendar::parse_instant;
use almanac::{host, scheduler};

/// `almanac slots`: which instants a schedule means, in local and UTC time.
#[derive(clap::Args)]
pub struct SlotsArgs {
    /// A task whose effective schedule (from the database) to preview.
    #[arg(conflicts_with_all = ["cron", "zone"], required_unless_present = "cron")]
    task: Option<String>,
    /// A cron expression to preview instead of a task's.
    #[arg(long, requires = "zone")]
    cron: Option<String>,
    /// The IANA zone for --cron.
    #[arg(long)]
    zone: Option<String>,
    /// First instant (RFC 3339, or a date meaning midnight in the schedule's zone).
    #[arg(long)]
    from: String,
    /// End, exclusive (same forms).
    #[arg(long)]
    to: String,
    /// One JSON object per slot, one per line.
    #[arg(long)]
    json: bool,
    /// Stop after this many slots.
    #[arg(long, default_value_t = 10_000)]
    limit: usize,
}

#[derive(Serialize)]
struct SlotLine {
    start: String,
    end: String,
    local: String,
    label: String,
}

fn utc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

pub async fn slots(url: Option<String>, data_dir: &std::path::Path, args: SlotsArgs) -> anyhow::Result<ExitCode> {
    let schedule = match (&args.task, &args.cron, &args.zone) {
        (None, Some(cron), Some(zone)) => Schedule::new(cron, zone)?,
        (Some(task), _, _) => {
            let url = super::database_url(url, data_dir, "almanac").await?;
            let (client, _conn) = super::connect_once(&url).await?;
            let (cron, zone) = scheduler::operate::schedule_of(&client, task)
                .await?
                .with_context(|| format!("no schedule for task {task:?} (it appears once a host has loaded its plugin)"))?;
            Schedule::new(&cron, &zone)?
        }
        _ => bail!("give a TASK, or --cron and --zone"),
    };
    let zone = schedule.zone();
    let from = parse_instant(&args.from, zone).map_err(anyhow::Error::msg).context("--from")?;
    let to = parse_instant(&args.to, zone).map_err(anyhow::Error::msg).context("--to")?;
    let slots = schedule
        .slots_after(from - chrono::Duration::microseconds(1))
        .take_while(|s| s.start < to)
        .take(args.limit);
    if !args.json {
        println!("{:<28} {:<22} {:>9}  {}", format!("LOCAL ({zone})"), "UTC", "LENGTH", "LABEL");
    }
    for slot in slots {
        let local = slot.start.with_timezone(&zone);
        if args.json {
            let line = SlotLine {
                start: utc(slot.start),
                end: utc(slot.end),
                local: local.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false),
                label: slot.label,
            };
            println!("{}", serde_json::to_string(&line)?);
        } else {
            let length = slot.length();
            println!("{:<28} {:<22} {:>9}  {}", local.format("%Y-%m-%d %H:%M:%S %:z"), slot.start.format("%Y-%m-%d %H:%M:%SZ"), length, slot.label);
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct ScheduleLine {
    task: String,
    cron: String,
    zone: String,
    catch_up: String,
    paused: bool,
    cursor: String,
    cursor_local: String,
    next_slot: Option<String>,
    next_slot_local: Option<String>,
}

pub async fn schedules(url: &str, json: bool) -> anyhow::Result<ExitCode> {
    let (client, _conn) = super::connect_once(url).await?;
    let rows = scheduler::operate::list(&client).await?;
    if !json {
        println!("{:<20} {:<16} {:<20} {:<12} {:<7} {:<26} {}", "TASK", "CRON", "ZONE", "CATCH-UP", "PAUSED", "CURSOR (LOCAL)", "NEXT SLOT (LOCAL / UTC)");
    }
    for r in rows {
        let (task, cron, zone) = (r.task, r.cron, r.zone);
        let cursor = r.generated_through;
        let schedule = Schedule::new(&cron, &zone).ok();
        let tz = schedule.as_ref().map_or(chrono_tz::UTC, Schedule::zone);
        let next = schedule.as_ref().and_then(|s| s.next_after(cursor)).map(|s| s.start);
        let line = ScheduleLine {
            task,
            cron,
            zone,
            catch_up: r.catch_up,
            paused: r.paused,
            cursor: utc(cursor),
            cursor_local: cursor.with_timezone(&tz).to_rfc3339(),
            next_slot: next.map(utc),
            next_slot_local: next.map(|t| t.with_timezone(&tz).to_rfc3339()),
        };
        if json {
            println!("{}", serde_json::to_string(&line)?);
        } else {
            let next = match (&line.next_slot_local, &line.next_slot) {
                (Some(l), Some(u)) => format!("{l} / {u}"),
                _ => "-".into(),
            };
            println!("{:<20} {:<16} {:<20} {:<12} {:<7} {:<26} {}", line.task, line.cron, line.zone, line.catch_up, line.paused, line.cursor_local, next);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn set_paused(url: &str, task: &str, paused: bool) -> anyhow::Result<ExitCode> {
    let (client, _conn) = super::connect_once(url).await?;
    if !scheduler::operate::set_paused(&client, task, paused).await? {
        let known: Vec<String> = scheduler::operate::list(&client).await?.into_iter().map(|r| r.task).collect();
        bail!("no schedule for task {task:?} (known: {})", known.join(", "));
    }
    println!("{task} {}", if paused { "paused" } else { "resumed" });
    Ok(ExitCode::SUCCESS)
}

/// `almanac backfill`: generate every slot of TASK in a range, ignoring the cursor and
/// the catch-up policy. Idempotent.
#[derive(clap::Args)]
pub struct BackfillArgs {
    task: String,
    /// First slot start (RFC 3339, or a date meaning midnight in the task's zone).
    #[arg(long)]
    from: String,
    /// End, exclusive (same forms); at most now.
    #[arg(long)]
    to: String,
    /// Folder of plugin components; the task's plugin plans the slots.
    #[arg(long)]
    plugins: std::path::PathBuf,
    /// Per-task overrides.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
}

pub async fn backfill(url: &str, data_dir: &std::path::Path, args: BackfillArgs) -> anyhow::Result<ExitCode> {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let options = host::Options {
        config: args.config.clone(),
        shutdown_grace: std::time::Duration::from_secs(1),
        register_schedules: false,
        ..host::Options::new(args.plugins.clone(), data_dir)
    };
    let host = host::Host::start(url, options.clone(), &shutdown).await?;
    let Some(plugin) = host.registry().get(&args.task).cloned() else {
        bail!("task {:?} is not among the plugins loaded from {} (loaded: {})", args.task, args.plugins.display(), host.registry().tasks().join(", "));
    };
    let zone = plugin.spec.schedule.zone();
    let from = parse_instant(&args.from, zone).map_err(anyhow::Error::msg).context("--from")?;
    let to = parse_instant(&args.to, zone).map_err(anyhow::Error::msg).context("--to")?;
    let conn = Arc::new(host.pool.get().await?);
    let now: DateTime<Utc> = almanac::db::server_now(&conn).await?;
    if to > now {
        bail!("--to {} is in the future; backfill only generates slots that have started (the schedule does the rest)", utc(to));
    }
    let total = plugin.spec.schedule.slots_after(from - chrono::Duration::microseconds(1)).take_while(|s| s.start < to).count();
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} slots, {per_sec}, eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(format!("backfill {}", args.task));
        bar
    });
    let outcome = scheduler::backfill(&conn, &plugin, from, to, &options.scheduler, |done, _| {
        if let Some(bar) = &bar {
            bar.set_position(done.generated as u64);
        }
    })
    .await?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    println!(
        "backfill {} [{} .. {}): {} slots, {} new jobs, {} already present",
        args.task,
        utc(from),
        utc(to),
        outcome.generated,
        outcome.jobs,
        outcome.planned - outcome.jobs
    );
    Ok(ExitCode::SUCCESS)
}
