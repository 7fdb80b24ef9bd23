//! `almanac resume TASK --dry-run`: the periods a resume — or a host coming back after an
//! outage — would generate now, and those its catch-up policy would skip, from the stored
//! schedule, cursor and ledger. Nothing is changed.
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, Utc};

use almanac::calendar::Period;
use almanac::scheduler;
use almanac::task::CatchUp;

/// At most this many due slots are listed.
const MAX_LISTED: usize = 10_000;

pub async fn preview(database: &super::database::Database, task: &str) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let rows = scheduler::operate::list(&client).await?;
    let known: Vec<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    let row = rows.iter().find(|r| r.task == task).with_context(|| format!("no schedule for task {task:?} (known: {})", known.join(", ")))?;
    let schedule =
        row.schedule().with_context(|| format!("task {task:?} runs on demand (or its stored schedule cannot be read here): it has no slots to resume"))?;
    let policy: CatchUp = row.catch_up.parse().map_err(anyhow::Error::msg)?;
    let unit: Period = scheduler::operate::period_of(&client, task).await?.unwrap_or_else(|| schedule.default_period());
    let now: DateTime<Utc> = almanac::db::server_now(&client).await?;
    let due: Vec<_> = schedule.slots_after(row.generated_through).take_while(|s| s.start <= now).take(MAX_LISTED + 1).collect();
    let periods: Vec<String> = due.iter().map(|s| schedule.period_label(unit, s.start)).collect();
    let ledger = scheduler::operate::ledger(&client, task, &periods, &due.iter().map(|s| s.start).collect::<Vec<_>>()).await?;
    let zone = schedule.zone();
    println!(
        "{task}: cursor {}, catch_up = {}, {}",
        row.generated_through.with_timezone(&zone).format("%Y-%m-%d %H:%M %:z"),
        row.catch_up,
        if row.paused { "paused" } else { "running" }
    );
    let (mut generate, mut skip, mut handled) = (0, 0, 0);
    for (slot, period) in due.iter().zip(&periods).take(MAX_LISTED) {
        let local = slot.start.with_timezone(&zone).format("%Y-%m-%d %H:%M %:z");
        let what = match ledger.iter().find(|p| p.period == *period).filter(|p| p.status != "skipped") {
            Some(p) => {
                handled += 1;
                format!("passed over ({} already)", p.status)
            }
            None => match policy.skips(&schedule, slot, now) {
                Some(reason) => {
                    skip += 1;
                    format!("skipped: {reason}")
                }
                None => {
                    generate += 1;
                    "generated".to_owned()
                }
            },
        };
        println!("  {period:<26} {local}  {what}");
    }
    if due.len() > MAX_LISTED {
        println!("  ... more than {MAX_LISTED} due slots: the list stops here");
    }
    println!("would generate {generate} period(s), skip {skip} by the policy, pass over {handled}; nothing was changed");
    Ok(ExitCode::SUCCESS)
}
