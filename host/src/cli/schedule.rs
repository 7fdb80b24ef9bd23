//! The calendar commands: `slots` (preview), `schedules`, `backfill`, and the
//! deliberate, recorded changes: `apply`, `cursor`, `pause`/`resume`, `forget`.
use std::collections::HashMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use serde::Serialize;

use almanac::calendar::parse_instant;
use almanac::calendar::Schedule;
use almanac::scheduler::applied;
use almanac::{host, scheduler};

/// `almanac slots`: which instants a schedule means, in local and UTC time, the period
/// each is for and, for a TASK, what the ledger of periods says of it.
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
    #[command(flatten)]
    business: super::business::BusinessArgs,
}

#[derive(Serialize)]
struct SlotLine {
    start: String,
    end: String,
    local: String,
    label: String,
    /// The business period the slot is for.
    period: String,
    /// What the ledger says of the period (with a TASK only).
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    /// With holiday calendars: the nominal day, the business day it runs on, and its
    /// place among the month's business days.
    #[serde(skip_serializing_if = "Option::is_none")]
    business: Option<almanac::calendar::business::Facts>,
}

fn utc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

pub async fn slots(url: Option<String>, pooled: bool, data_dir: &std::path::Path, args: SlotsArgs) -> anyhow::Result<ExitCode> {
    let mut ledger = None;
    let mut after: Vec<String> = Vec::new();
    let (schedule, unit) = match (&args.task, &args.cron, &args.zone) {
        (None, Some(cron), Some(zone)) => {
            let schedule = args.business.schedule(cron, zone)?;
            let unit = args.business.period.as_deref().map_or(Ok(schedule.default_period()), str::parse).map_err(anyhow::Error::msg)?;
            (schedule, unit)
        }
        (Some(task), _, _) => {
            if args.business.wanted() {
                bail!("a task's calendars are its own (almanac.toml); give --cron and --zone to preview calendar options");
            }
            let (client, _conn) = super::database::Database::of(url, data_dir, "almanac", pooled).await?.connect().await?;
            let stored = scheduler::operate::schedule_of(&client, task)
                .await?
                .with_context(|| format!("no schedule for task {task:?} (it appears once a host has loaded its plugin)"))?;
            let schedule = stored.schedule().map_err(anyhow::Error::msg)?;
            let schedule = schedule.with_context(|| format!("task {task:?} runs on demand: it has no slots to preview"))?;
            let unit = scheduler::operate::period_of(&client, task).await?.unwrap_or_else(|| schedule.default_period());
            after = stored.after.clone();
            ledger = Some((client, _conn, task.clone()));
            (schedule, unit)
        }
        _ => bail!("give a TASK, or --cron and --zone"),
    };
    let zone = schedule.zone();
    let from = parse_instant(&args.from, zone).map_err(anyhow::Error::msg).context("--from")?;
    let to = parse_instant(&args.to, zone).map_err(anyhow::Error::msg).context("--to")?;
    let slots: Vec<_> = schedule.slots_after(from - chrono::Duration::microseconds(1)).take_while(|s| s.start < to).take(args.limit).collect();
    let mut periods: Vec<String> = slots.iter().map(|s| schedule.period_label(unit, s.start)).collect();
    // What the ledger says of each period (a task's only): generated, and under which
    // revision and at which instant, skipped and why, enqueued into, or not yet. An
    // instant the ledger keys a period under is that period, whatever it is named now.
    let rows = match &ledger {
        Some((client, _, task)) => scheduler::operate::ledger(client, task, &periods, &slots.iter().map(|s| s.start).collect::<Vec<_>>()).await?,
        None => Vec::new(),
    };
    let by_instant: HashMap<DateTime<Utc>, String> = rows.iter().map(|p| (p.slot, p.period.clone())).collect();
    for (slot, period) in slots.iter().zip(periods.iter_mut()) {
        if let Some(held) = by_instant.get(&slot.start) {
            period.clone_from(held);
        }
    }
    let known: HashMap<String, scheduler::operate::Period> = rows.into_iter().map(|p| (p.period.clone(), p)).collect();
    // Periods whose jobs wait for the tasks this one comes after.
    let waiting = match (&ledger, after.is_empty()) {
        (Some((client, _, _)), false) => scheduler::operate::unsettled(client, &after, &periods).await?,
        _ => Default::default(),
    };
    let waits = |period: &str| if waiting.contains(period) { format!("; its jobs wait for {}", after.join(", ")) } else { String::new() };
    let state = |slot: &almanac::calendar::Slot, period: &str| -> Option<String> {
        ledger.as_ref()?;
        let Some(p) = known.get(period) else { return Some("-".into()) };
        let revision = p.revision.map_or_else(|| "revision unknown".to_owned(), |r| format!("revision {r}"));
        Some(match p.status.as_str() {
            "generated" if p.slot != slot.start => format!("generated at {} ({revision}, an older calendar){}", utc(p.slot), waits(period)),
            "generated" => format!("generated ({revision}){}", waits(period)),
            "empty" => format!("empty: its plan returned no keys ({revision}){}", waits(period)),
            "skipped" => format!("skipped: {}", p.reason.as_deref().unwrap_or("-")),
            other => format!("{other} (keyed at {}){}", utc(p.slot), waits(period)),
        })
    };
    if !args.json && !after.is_empty() {
        println!("runs after: {} (a period's jobs wait until theirs of the same period are done)", after.join(", "));
    }
    if !args.json {
        let (local, period) = (format!("LOCAL ({zone})"), format!("PERIOD ({unit})"));
        let head = format!("{local:<28} {:<22} {:>9}  {period}", "UTC", "LENGTH");
        match ledger {
            Some(_) => println!("{head:<90}  STATE"),
            None => println!("{head}"),
        }
    }
    let mut shown = std::collections::HashSet::new();
    for (slot, period) in slots.iter().zip(&periods) {
        let local = slot.start.with_timezone(&zone);
        // A second slot of a period already listed is not its own period.
        let state = if shown.insert(period.clone()) {
            state(slot, period)
        } else {
            ledger.as_ref().map(|_| format!("the period's later slot: not generated ({period} is one period)"))
        };
        if args.json {
            let line = SlotLine {
                start: utc(slot.start),
                end: utc(slot.end),
                local: local.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false),
                label: slot.label.clone(),
                period: period.clone(),
                state,
                business: slot.business.clone(),
            };
            println!("{}", serde_json::to_string(&line)?);
        } else {
            let line = format!("{:<28} {:<22} {:>9}  {period}", local.format("%Y-%m-%d %H:%M:%S %:z"), slot.start.format("%Y-%m-%d %H:%M:%SZ"), slot.length());
            match state {
                Some(state) => println!("{line:<90}  {state}"),
                None => println!("{line}"),
            }
        }
    }
    if !args.json && unit != almanac::calendar::Period::Slot {
        // Periods of the range without any slot: outside the calendar (no job is for them).
        let mut day = from.with_timezone(&zone).date_naive();
        let last = to.with_timezone(&zone).date_naive();
        let mut outside: Vec<String> = Vec::new();
        while day < last && outside.len() < 100 {
            let label = unit.day_label(day);
            if !periods.contains(&label) && !outside.contains(&label) {
                outside.push(label);
            }
            day = day.succ_opt().unwrap_or(last);
        }
        if !outside.is_empty() && slots.len() < args.limit {
            println!("outside the calendar (no slot, so no jobs): {}", outside.join(", "));
        }
    }
    let (first, last) = (from.with_timezone(&zone).date_naive(), to.with_timezone(&zone).date_naive());
    super::business::print_skipped(&schedule, first, last.pred_opt().unwrap_or(last), args.json)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct ScheduleLine {
    task: String,
    cron: String,
    zone: String,
    catch_up: String,
    paused: bool,
    /// None for an on-demand task: it has no calendar to walk.
    cursor: Option<String>,
    cursor_local: Option<String>,
    next_slot: Option<String>,
    next_slot_local: Option<String>,
}

pub async fn schedules(database: &super::database::Database, json: bool) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let rows = scheduler::operate::list(&client).await?;
    if !json {
        println!("{:<20} {:<16} {:<20} {:<12} {:<7} {:<26} NEXT SLOT (LOCAL / UTC)", "TASK", "CRON", "ZONE", "CATCH-UP", "PAUSED", "CURSOR (LOCAL)");
    }
    for r in rows {
        let schedule = r.schedule();
        let (task, cron, zone) = (r.task, r.cron, r.zone);
        let cursor = r.generated_through;
        let cron = cron.unwrap_or_else(|| "(on demand)".into());
        let tz = schedule.as_ref().map_or(chrono_tz::UTC, Schedule::zone);
        let next = schedule.as_ref().and_then(|s| s.next_after(cursor)).map(|s| s.start);
        let line = ScheduleLine {
            task,
            cron,
            zone,
            catch_up: r.catch_up,
            paused: r.paused,
            cursor: schedule.as_ref().map(|_| utc(cursor)),
            cursor_local: schedule.as_ref().map(|_| cursor.with_timezone(&tz).to_rfc3339()),
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
            let cursor = line.cursor_local.as_deref().unwrap_or("-");
            println!("{:<20} {:<16} {:<20} {:<12} {:<7} {:<26} {}", line.task, line.cron, line.zone, line.catch_up, line.paused, cursor, next);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn set_paused(database: &super::database::Database, task: &str, paused: bool, reason: Option<&str>) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let command = if paused { "pause" } else { "resume" };
    let Some(was) = scheduler::operate::set_paused(&client, task, paused, &applied::origin(command), reason).await? else {
        let known: Vec<String> = scheduler::operate::list(&client).await?.into_iter().map(|r| r.task).collect();
        bail!("no schedule for task {task:?} (known: {})", known.join(", "));
    };
    let state = if paused { "paused" } else { "resumed" };
    match was == paused {
        true => println!("{task} already {state} (nothing recorded)"),
        false if paused => {
            println!("{task} paused: no new slots are generated; jobs already generated or enqueued still run (`almanac hold {task}` stops them)")
        }
        false => println!("{task} resumed: its slots are generated again, catching up per its policy"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `almanac hold` / `release`.
pub async fn set_held(database: &super::database::Database, task: &str, held: bool, reason: Option<&str>) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let command = if held { "hold" } else { "release" };
    let Some((was, pending)) = scheduler::operate::set_held(&client, task, held, &applied::origin(command), reason).await? else {
        let known: Vec<String> = scheduler::operate::list(&client).await?.into_iter().map(|r| r.task).collect();
        bail!("no task {task:?} (known: {})", known.join(", "));
    };
    match (was == held, held) {
        (true, true) => println!("{task} already held (nothing recorded); {pending} pending"),
        (true, false) => println!("{task} is not held (nothing recorded); {pending} pending"),
        (false, true) => println!(
            "{task} held: no job of it starts on any host from now on; {pending} pending wait, jobs running now finish. \
             `almanac release {task}` lets them run"
        ),
        (false, false) => println!("{task} released: its {pending} pending jobs run again"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `almanac cursor`: where TASK's schedule resumes generating.
#[derive(clap::Args)]
pub struct CursorArgs {
    task: String,
    /// The new cursor: slots starting after it are generated (catch-up policy applies).
    /// RFC 3339, a slot label, UTC as `almanac jobs` prints it, a date in the task's
    /// zone, or `now` (skip everything missed).
    #[arg(long)]
    to: String,
    /// Why, recorded with the change.
    #[arg(long)]
    reason: Option<String>,
    /// List the periods the move would let the scheduler generate (back) or pass over for
    /// good (forward); change nothing.
    #[arg(long)]
    preview: bool,
}

pub async fn cursor(database: &super::database::Database, args: CursorArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let Some(schedule) = super::database::task_schedule(&client, &args.task).await? else {
        bail!("{} runs on demand: it has no cursor", args.task);
    };
    let to = match args.to.trim() {
        "now" => almanac::db::server_now(&client).await?,
        text => schedule.parse_slot(text).map_err(anyhow::Error::msg).context("--to")?,
    };
    if args.preview {
        let Some(stored) = scheduler::operate::schedule_of(&client, &args.task).await? else {
            bail!("no schedule for task {:?}", args.task);
        };
        let moved = scheduler::range::cursor_preview(&client, &args.task, &schedule, stored.cursor, to).await?;
        let what = if moved.back { "moved back, the scheduler would consider" } else { "moved forward, these would never be generated" };
        println!("{}: cursor {} -> {}; {what}:", args.task, utc(moved.cursor), utc(moved.to));
        print_preview(&moved.periods, &args.task, if moved.back { "cursor (catch-up policy applies)" } else { "cursor" });
        return Ok(ExitCode::SUCCESS);
    }
    let origin = applied::origin("cursor");
    let Some(from) = scheduler::operate::set_cursor(&client, &args.task, to, &origin, args.reason.as_deref()).await? else {
        bail!("no schedule for task {:?} (forgotten meanwhile?)", args.task);
    };
    let next = schedule.next_after(to).map_or("none".to_owned(), |s| format!("{} ({})", s.label, utc(s.start)));
    println!("{}: cursor {} -> {}; the next slot generated is {next}", args.task, utc(from), utc(to));
    if to < from {
        println!("(moved back: slots after {} are considered again; jobs that exist are not created twice)", utc(to));
    }
    Ok(ExitCode::SUCCESS)
}

/// `almanac apply`: make the plugins' schedules, as this file adjusts them, the ones
/// every host runs by.
#[derive(clap::Args)]
pub struct ApplyArgs {
    /// Folder of plugin components: their `describe()` is the schedule the file adjusts.
    #[arg(long)]
    plugins: std::path::PathBuf,
    /// Per-task overrides [default: ./almanac.toml if it exists].
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Why, recorded with each change.
    #[arg(long)]
    reason: Option<String>,
    /// Say what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// With a change of a task's period unit (`period` in the file): the local day
    /// (YYYY-MM-DD, the first day of one of the new unit's periods) from which the new
    /// unit applies. Without it such a change is refused.
    #[arg(long, value_name = "DATE")]
    period_from: Option<chrono::NaiveDate>,
}

pub async fn apply(database: &super::database::Database, data_dir: &std::path::Path, args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let config_path = args.config.clone().or_else(|| Some(almanac::config::default_path()).filter(|p| p.exists()));
    let options = host::Options {
        config: config_path.clone(),
        shutdown_grace: std::time::Duration::from_secs(1),
        register_schedules: false,
        pooled: database.pooled,
        ..host::Options::new(args.plugins.clone(), data_dir)
    };
    // A dry run loads the folder and admits nothing (a host would set the plugins up: their
    // tables, roles, grants); applying for real starts a host as a deploy does.
    let (registry, _host) = match args.dry_run {
        true => {
            let tls = database.target()?.tls;
            let (client, _conn) = database.connect().await?;
            let name = almanac::db::database_name(&client).await?;
            let runtime = almanac::plugin::Runtime::new(almanac::plugin::Limits::default(), Some(data_dir.join("cache")), tls, &name)?;
            let (registry, refused) = almanac::catalog::load_only(&runtime, &args.plugins).await?;
            for why in refused {
                eprintln!("not loaded: {why}");
            }
            (Arc::new(registry), None)
        }
        false => {
            let host = host::Host::start(&database.url, options, &shutdown).await?;
            (host.registry(), Some(host))
        }
    };
    let config = config_path.as_deref().map(almanac::config::Config::load).transpose()?;
    let (mut client, _conn) = database.connect().await?;
    let origin = applied::origin("apply");
    let reason = args.reason.clone().or_else(|| config_path.as_ref().map(|p| format!("from {}", p.display())));
    if registry.is_empty() {
        bail!("no plugins loaded from {}: nothing to apply", args.plugins.display());
    }
    let mut tasks = Vec::new();
    for plugin in registry.iter() {
        let mut spec = plugin.spec.clone();
        let settings = match &config {
            Some(config) => config.apply_to(&mut spec)?,
            None => almanac::config::Config::none().apply_to(&mut spec)?,
        };
        tasks.push((spec, settings));
    }
    // Each task in a transaction of its own, as short as it can be: running hosts lock
    // the same schedule rows every tick.
    let (changed, registered) = if args.dry_run { ("would change", "would register") } else { ("changed", "registered") };
    for (spec, settings) in in_dependency_order(tasks) {
        let tx = client.transaction().await?;
        let outcome =
            applied::apply(&tx, &spec, &settings, &origin, reason.as_deref(), args.period_from).await.map_err(|e| anyhow::anyhow!("{}: {e}", spec.name))?;
        match args.dry_run {
            true => tx.rollback().await?,
            false => tx.commit().await?,
        }
        print_applied(&spec, outcome, (changed, registered));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_applied(spec: &almanac::task::TaskSpec, outcome: applied::Applied, (changed, registered): (&str, &str)) {
    match outcome {
        applied::Applied::Unchanged => println!("{}: unchanged", spec.name),
        applied::Applied::Registered { cursor } => match &spec.schedule {
            Some(s) => println!("{}: {registered} ({:?} in {}, cursor {})", spec.name, s.cron(), s.zone(), utc(cursor)),
            None => println!("{}: {registered} (on demand)", spec.name),
        },
        applied::Applied::Changed { changes, cursor, moved } => {
            println!("{}: {changed}: {}", spec.name, changes.join(", "));
            if !moved.is_empty() {
                println!("  periods whose slot moves (a month back to a year ahead):");
                for line in &moved {
                    println!("    {line}");
                }
            }
            if let Some((from, to, end)) = cursor {
                println!(
                    "  cursor {} -> {}: the new schedule takes over at {}, where the last slot handled under the old one ends",
                    utc(from),
                    utc(to),
                    utc(end)
                );
            }
        }
    }
}

/// The tasks a folder's tasks come after are applied before them, so that the first
/// deploy of both passes the check that they are registered. A circle is left in file
/// order: the check refuses it.
fn in_dependency_order(
    mut pending: Vec<(almanac::task::TaskSpec, almanac::config::TaskSettings)>,
) -> Vec<(almanac::task::TaskSpec, almanac::config::TaskSettings)> {
    let mut ordered = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let waits = |after: &[String]| after.iter().any(|a| pending.iter().any(|(spec, _)| spec.name == *a));
        let next = pending.iter().position(|(_, settings)| !waits(&settings.after)).unwrap_or(0);
        ordered.push(pending.remove(next));
    }
    ordered
}

/// `almanac forget`: TASK is gone for good.
#[derive(clap::Args)]
pub struct ForgetArgs {
    task: String,
    /// Discard its pending and failed jobs (refused while it has any, otherwise).
    #[arg(long)]
    discard_pending: bool,
    /// Why, recorded with the change.
    #[arg(long)]
    reason: Option<String>,
}

pub async fn forget(database: &super::database::Database, args: ForgetArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let task = &args.task;
    super::database::task_schedule(&client, task).await?;
    let origin = applied::origin("forget");
    let open: i64 = almanac::status::report(&client).await?.iter().filter(|s| s.task == *task).map(|s| s.pending + s.failed).sum();
    if open > 0 && !args.discard_pending {
        bail!("{task} has {open} pending or failed job(s): give --discard-pending to discard them with it (they are kept, marked discarded), or let them finish first");
    }
    let reason = args.reason.clone().unwrap_or_else(|| "the task is forgotten".into());
    let discarded = match open {
        0 => 0,
        _ => almanac::executor::operate::discard(&client, task, Default::default(), &origin, &reason).await?,
    };
    scheduler::operate::forget(&client, task, &origin, args.reason.as_deref()).await?;
    println!("{task} forgotten: its schedule is gone ({discarded} job(s) discarded; done jobs kept as evidence until pruned)");
    println!("remove its plugin from every host's folder: a host that loads it again registers it as a new task (cursor now)");
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
    /// Per-task overrides [default: ./almanac.toml if it exists].
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// List the periods it would generate and those it would pass over; change nothing.
    #[arg(long)]
    preview: bool,
    /// Why, recorded with the change.
    #[arg(long)]
    reason: Option<String>,
}

pub async fn backfill(database: &super::database::Database, data_dir: &std::path::Path, args: BackfillArgs) -> anyhow::Result<ExitCode> {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let options = host::Options {
        config: args.config.clone().or_else(|| Some(almanac::config::default_path()).filter(|p| p.exists())),
        shutdown_grace: std::time::Duration::from_secs(1),
        register_schedules: false,
        pooled: database.pooled,
        ..host::Options::new(args.plugins.clone(), data_dir)
    };
    let host = host::Host::start(&database.url, options.clone(), &shutdown).await?;
    let Some(plugin) = host.registry().get(&args.task).cloned() else {
        bail!("task {:?} is not among the plugins loaded from {} (loaded: {})", args.task, args.plugins.display(), host.registry().tasks().join(", "));
    };
    // A backfill generates by the schedule every host runs by, never by another one.
    let Some(schedule) = &plugin.spec.schedule else {
        bail!("{} runs on demand: it has no slots to backfill; enqueue its jobs (almanac.enqueue, `almanac enqueue`)", args.task);
    };
    let zone = schedule.zone();
    let from = parse_instant(&args.from, zone).map_err(anyhow::Error::msg).context("--from")?;
    let to = parse_instant(&args.to, zone).map_err(anyhow::Error::msg).context("--to")?;
    let conn = Arc::new(host.pool.get().await?);
    // The backfill itself checks the range (scheduler::backfill_recorded); a preview asks
    // the same rule first.
    if args.preview {
        scheduler::range::check_backfill(&conn, &args.task, schedule, from, to).await?;
        print_preview(&scheduler::range::preview(&***conn, &args.task, schedule, from, to).await?, &args.task, "backfill");
        return Ok(ExitCode::SUCCESS);
    }
    let total = schedule.slots_after(from - chrono::Duration::microseconds(1)).take_while(|s| s.start < to).count();
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} slots, {per_sec}, eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(format!("backfill {}", args.task));
        bar
    });
    let origin = applied::origin("backfill");
    let outcome = scheduler::backfill_recorded(&conn, &host.logins, &plugin, from, to, &options.scheduler, &origin, args.reason.as_deref(), |done, _| {
        if let Some(bar) = &bar {
            bar.set_position(done.generated as u64);
        }
    })
    .await?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    println!(
        "backfill {} [{} .. {}): {} periods generated, {} new jobs, {} already present; {} periods passed over",
        args.task,
        utc(from),
        utc(to),
        outcome.generated,
        outcome.jobs,
        outcome.planned - outcome.jobs,
        outcome.handled.len()
    );
    if !outcome.handled.is_empty() {
        const SHOWN: usize = 20;
        let named: Vec<String> = outcome
            .handled
            .iter()
            .take(SHOWN)
            .map(|(period, revision)| format!("{period} (revision {})", revision.map_or("unknown".into(), |r| r.to_string())))
            .collect();
        let more = outcome.handled.len().saturating_sub(SHOWN);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        println!("  passed over (generated or skipped before): {}{more}", named.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// A range's preview: each listed period, new or what the ledger says of it.
fn print_preview(preview: &scheduler::range::Preview, task: &str, what: &str) {
    let more = if preview.more { "more than " } else { "" };
    println!(
        "{what} {task} [{} .. {}): {more}{} period(s), {} new (generated) and {} in the ledger already (passed over); the first {}:",
        utc(preview.from),
        utc(preview.to),
        preview.total,
        preview.new,
        preview.total - preview.new,
        preview.periods.len()
    );
    for p in &preview.periods {
        println!("  {:<28} {}  {}", p.period, utc(p.start), p.ledger.as_deref().map_or("new".to_owned(), |l| format!("passed over ({l})")));
    }
    if preview.total > preview.periods.len() {
        println!("  … and {} more", preview.total - preview.periods.len());
    }
}
