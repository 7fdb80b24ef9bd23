//! The operator's commands: `jobs`, `retry`, `prune`.
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use almanac::executor::operate;

#[derive(clap::Args)]
pub struct JobsArgs {
    /// Only jobs in this state.
    #[arg(long, value_parser = ["pending", "done", "failed"])]
    status: Option<String>,
    /// Only jobs of this task.
    #[arg(long)]
    task: Option<String>,
    #[arg(long, default_value_t = 50)]
    limit: i64,
    /// One JSON object per job, one per line.
    #[arg(long)]
    json: bool,
}

pub async fn jobs(url: &str, args: JobsArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = super::connect_once(url).await?;
    let rows = operate::jobs(&client, args.status.as_deref(), args.task.as_deref(), args.limit).await?;
    if !args.json {
        println!("{:<20} {:<20} {:<16} {:<8} {:>8} {:>7}  {}", "TASK", "SLOT (UTC)", "KEY", "STATUS", "ATTEMPTS", "RETRIES", "LAST ERROR");
    }
    for job in rows {
        if args.json {
            println!("{}", serde_json::to_string(&job)?);
        } else {
            let error = job.last_error.unwrap_or_default().replace('\n', " ");
            println!(
                "{:<20} {:<20} {:<16} {:<8} {:>8} {:>7}  {}",
                job.task,
                job.slot.format("%Y-%m-%d %H:%M:%S"),
                job.key,
                job.status,
                job.attempts,
                job.retries,
                error
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct RetryArgs {
    /// The task whose failed jobs go back to pending.
    #[arg(long)]
    task: String,
    /// Only this slot: RFC 3339, a slot label, UTC as `almanac jobs` prints it, or a date
    /// (that day's slot of a daily schedule).
    #[arg(long)]
    slot: Option<String>,
    /// Only this key.
    #[arg(long)]
    key: Option<String>,
}

pub async fn retry(url: &str, args: RetryArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = super::connect_once(url).await?;
    let schedule = super::task_schedule(&client, &args.task).await?;
    let slot = args.slot.as_deref().map(|s| schedule.parse_slot(s)).transpose().map_err(anyhow::Error::msg).context("--slot")?;
    let n = operate::retry(&client, &args.task, slot, args.key.as_deref()).await?;
    println!("{n} failed job(s) of {} back to pending; their earlier attempts stay in almanac.attempts", args.task);
    Ok(ExitCode::SUCCESS)
}

pub async fn prune(url: &str, older_than: Duration) -> anyhow::Result<ExitCode> {
    let (client, _conn) = super::connect_once(url).await?;
    let deleted = operate::prune(&client, older_than).await?;
    println!("pruned {deleted} done job(s) older than {}", almanac::task::format_duration(older_than));
    Ok(ExitCode::SUCCESS)
}
