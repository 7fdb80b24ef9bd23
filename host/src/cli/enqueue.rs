//! `almanac enqueue`: one job by identity, through `almanac.enqueue` as an application's.
use std::process::ExitCode;

use anyhow::Context;

use almanac::{db, scheduler};

use super::database::{parse_slot, task_schedule, Database};

#[derive(clap::Args)]
pub struct EnqueueArgs {
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
    /// Not before then: RFC 3339 (`2026-12-09T08:00:00Z`) or a duration from now (`3d`,
    /// `90m`). A job never runs before its slot starts, whatever this says.
    #[arg(long, value_parser = parse_run_after)]
    run_after: Option<chrono::DateTime<chrono::Utc>>,
}

/// `--run-after`: an instant, or a duration from now.
fn parse_run_after(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let d = humantime::parse_duration(s).map_err(|e| format!("neither an RFC 3339 instant nor a duration ({e})"))?;
    chrono::Duration::from_std(d).ok().and_then(|d| chrono::Utc::now().checked_add_signed(d)).ok_or_else(|| format!("{s} from now is out of range"))
}

pub async fn run(database: &Database, args: EnqueueArgs) -> anyhow::Result<ExitCode> {
    let EnqueueArgs { task, slot, key, payload, off_calendar, run_after } = args;
    let (client, _conn) = database.connect().await?;
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
    let origin = scheduler::applied::origin("enqueue");
    let job = scheduler::NewJob { task: &task, slot, key: &key, payload: payload.as_ref(), run_after };
    let new = scheduler::enqueue(&client, &job, true, &origin).await.map_err(|e| anyhow::anyhow!(db::error_chain(&e)))?;
    let from = run_after.map_or(slot, |r| r.max(slot));
    match (new, from > chrono::Utc::now()) {
        (true, true) if from > slot => println!("enqueued; it runs from {}", from.format("%Y-%m-%d %H:%M:%SZ")),
        (true, true) => println!("enqueued; it runs from {} (its slot has not started)", slot.format("%Y-%m-%d %H:%M:%SZ")),
        (true, false) => println!("enqueued"),
        (false, _) if run_after.is_some() => println!("already present (no-op): its run-after is left as it was"),
        (false, _) => println!("already present (no-op)"),
    }
    Ok(ExitCode::SUCCESS)
}
