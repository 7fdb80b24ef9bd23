//! The operator's commands: `jobs`, `retry`, `discard`, `prune`.
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use almanac::executor::operate;

#[derive(clap::Args)]
pub struct JobsArgs {
    /// Only jobs in this state.
    #[arg(long, value_parser = ["pending", "done", "failed", "discarded"])]
    status: Option<String>,
    /// Only jobs of this task.
    #[arg(long)]
    task: Option<String>,
    /// Only the jobs keyed KEY.
    #[arg(long, conflicts_with = "key_prefix")]
    key: Option<String>,
    /// Only the jobs whose key starts with this.
    #[arg(long)]
    key_prefix: Option<String>,
    #[arg(long, default_value_t = 50)]
    limit: i64,
    /// The attempt history of the jobs keyed KEY (with --task; in every slot): each
    /// failed attempt, interruption by the database and crash, oldest first.
    #[arg(long, value_name = "KEY", requires = "task")]
    attempts: Option<String>,
    /// One JSON object per job (or attempt), one per line.
    #[arg(long)]
    json: bool,
}

pub async fn jobs(database: &super::database::Database, args: JobsArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    if let (Some(key), Some(task)) = (&args.attempts, &args.task) {
        return attempts(&client, task, key, args.limit, args.json).await;
    }
    let filter =
        operate::JobFilter { status: args.status.as_deref(), task: args.task.as_deref(), key: args.key.as_deref(), key_prefix: args.key_prefix.as_deref() };
    let rows = operate::jobs(&client, filter, args.limit).await?;
    if args.json {
        for job in rows {
            println!("{}", serde_json::to_string(&job)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    // As wide as the widest task and key shown, so long ones keep the columns aligned.
    let keys: Vec<String> = rows.iter().map(|j| almanac::text::printable(&j.key).into_owned()).collect();
    let task_width = rows.iter().map(|j| j.task.len()).chain([4]).max().unwrap_or(4);
    let key_width = keys.iter().map(|k| k.chars().count()).chain([3]).max().unwrap_or(3);
    println!(
        "{:<task_width$} {:<20} {:<key_width$} {:<9} {:<20} {:>8} {:>7}  LAST ERROR",
        "TASK", "SLOT (UTC)", "KEY", "STATUS", "DUE (UTC)", "ATTEMPTS", "RETRIES"
    );
    for (job, key) in rows.iter().zip(&keys) {
        let error = almanac::text::printable(job.last_error.as_deref().unwrap_or_default()).into_owned();
        // When a pending job may next be claimed: its run_after (an enqueue's, a retry's backoff).
        let due = if job.status == "pending" { job.run_after.format("%Y-%m-%d %H:%M:%S").to_string() } else { "-".into() };
        println!(
            "{:<task_width$} {:<20} {:<key_width$} {:<9} {:<20} {:>8} {:>7}  {}",
            job.task,
            job.slot.format("%Y-%m-%d %H:%M:%S"),
            key,
            job.status,
            due,
            job.attempts,
            job.retries,
            error
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `almanac jobs --task T --attempts KEY`.
async fn attempts(client: &tokio_postgres::Client, task: &str, key: &str, limit: i64, json: bool) -> anyhow::Result<ExitCode> {
    let rows = operate::attempts(client, task, key, None, limit).await?;
    if json {
        for attempt in rows {
            println!("{}", serde_json::to_string(&attempt)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no recorded attempts of task {task:?} key {:?} (a job done at its first attempt has none)", almanac::text::printable(key));
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:<20} {:>7} {:<9} {:<20} {:<24}  ERROR", "SLOT (UTC)", "ATTEMPT", "KIND", "AT (UTC)", "HOST");
    for a in rows {
        println!(
            "{:<20} {:>7} {:<9} {:<20} {:<24}  {}",
            a.slot.format("%Y-%m-%d %H:%M:%S"),
            a.attempt,
            a.kind,
            a.failed_at.format("%Y-%m-%d %H:%M:%S"),
            almanac::text::printable(a.host.as_deref().unwrap_or("-")),
            almanac::text::printable(&a.error)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Which jobs of a task: all of them, or those of one slot or a range of slots, of one key,
/// or of a key in either.
#[derive(clap::Args)]
pub struct Selector {
    /// The task.
    #[arg(long)]
    task: String,
    /// Only this slot: RFC 3339, a slot label, UTC as `almanac jobs` prints it, or a date
    /// (that day's slot of a daily schedule).
    #[arg(long)]
    slot: Option<String>,
    /// Only this key.
    #[arg(long)]
    key: Option<String>,
    /// Only slots at or after this instant: RFC 3339, UTC as `almanac jobs` prints it, or a
    /// date (midnight in the task's zone), as `almanac backfill --from` reads it.
    #[arg(long, conflicts_with = "slot")]
    from: Option<String>,
    /// Only slots before this instant (same forms as --from).
    #[arg(long, conflicts_with = "slot")]
    to: Option<String>,
}

impl Selector {
    /// What narrows it as given, for a message that nothing matched.
    fn described(&self) -> String {
        let slot = self.slot.as_ref().map(|s| format!(" slot {s:?}")).unwrap_or_default();
        let key = self.key.as_ref().map(|k| format!(" key {:?}", almanac::text::printable(k))).unwrap_or_default();
        let from = self.from.as_ref().map(|s| format!(" from {s:?}")).unwrap_or_default();
        let to = self.to.as_ref().map(|s| format!(" to {s:?}")).unwrap_or_default();
        format!("{slot}{key}{from}{to}")
    }

    /// Nothing narrows it.
    fn is_every(&self) -> bool {
        self.slot.is_none() && self.key.is_none() && self.from.is_none() && self.to.is_none()
    }

    /// The jobs it names, read by the task's calendar; refused for a task no host registered.
    async fn which(&self, client: &tokio_postgres::Client) -> anyhow::Result<operate::Which<'_>> {
        let schedule = super::database::task_schedule(client, &self.task).await?;
        let zone = schedule.as_ref().map_or(chrono_tz::UTC, |s| s.zone());
        let instant = |text: &Option<String>, flag: &str| {
            text.as_deref().map(|t| almanac::calendar::parse_instant(t, zone).map_err(anyhow::Error::msg).context(flag.to_owned())).transpose()
        };
        Ok(operate::Which {
            slot: self.slot.as_deref().map(|s| super::database::parse_slot(schedule.as_ref(), s)).transpose().context("--slot")?,
            key: self.key.as_deref(),
            from: instant(&self.from, "--from")?,
            to: instant(&self.to, "--to")?,
        })
    }
}

/// `retry`: failed jobs back to pending.
#[derive(clap::Args)]
pub struct RetryArgs {
    #[command(flatten)]
    jobs: Selector,
}

pub async fn retry(database: &super::database::Database, args: RetryArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let jobs = &args.jobs;
    let which = jobs.which(&client).await?;
    let n = operate::retry(&client, &jobs.task, which, &almanac::scheduler::applied::origin("retry")).await?;
    Ok(super::matched(n, format!("{n} failed job(s) of {} back to pending; their earlier attempts stay in almanac.attempts", jobs.task), || {
        format!("no failed job of {} matched{}", jobs.task, jobs.described())
    }))
}

/// `discard`: pending or failed jobs that must never run.
#[derive(clap::Args)]
pub struct DiscardArgs {
    #[command(flatten)]
    jobs: Selector,
    /// Every pending and failed job of the task (required without --slot, --key, --from or --to).
    #[arg(long, conflicts_with_all = ["slot", "key", "from", "to"])]
    all: bool,
    /// Why, stored on each job and recorded with the change.
    #[arg(long)]
    reason: String,
}

pub async fn discard(database: &super::database::Database, args: DiscardArgs) -> anyhow::Result<ExitCode> {
    let jobs = &args.jobs;
    if !args.all && jobs.is_every() {
        anyhow::bail!("say which jobs: --slot, --key, --from/--to, or --all for every pending and failed job of {}", jobs.task);
    }
    let (client, _conn) = database.connect().await?;
    let which = jobs.which(&client).await?;
    let origin = almanac::scheduler::applied::origin("discard");
    let n = operate::discard(&client, &jobs.task, which, &origin, &args.reason).await?;
    Ok(super::matched(
        n.max(0) as u64,
        format!("{n} pending or failed job(s) of {} discarded: kept as evidence, never run, pruned like done jobs", jobs.task),
        || format!("nothing discarded: no pending or failed job of {} matched{}", jobs.task, jobs.described()),
    ))
}

pub async fn prune(database: &super::database::Database, older_than: Duration) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let pruned = almanac::history::prune(&client, older_than).await?;
    let (jobs, outbox) = (&pruned.jobs, &pruned.outbox);
    let done: i64 = jobs.dropped.iter().map(|(_, n)| n).sum();
    let delivered: i64 = outbox.dropped.iter().map(|(_, n)| n).sum();
    println!(
        "pruned slots older than {}: {} month partition(s) dropped ({done} done job(s)), {} done or discarded job(s) deleted from the default partition",
        almanac::task::format_duration(older_than),
        jobs.dropped.len(),
        jobs.deleted
    );
    println!(
        "pruned outbox messages created before then: {} month partition(s) dropped ({delivered} delivered message(s)), {} delivered message(s) deleted from the default partition",
        outbox.dropped.len(),
        outbox.deleted
    );
    for (name, n) in &jobs.dropped {
        println!("  dropped {name} ({n} done job(s))");
    }
    for (name, n) in &outbox.dropped {
        println!("  dropped {name} ({n} delivered message(s))");
    }
    for name in &jobs.kept {
        println!("  kept {name}: it holds jobs still to run (pending or failed); retry or discard them, then prune again");
    }
    for name in &outbox.kept {
        println!("  kept {name}: it holds messages still to deliver, or dead ones (almanac outbox retry); prune again once they are delivered");
    }
    for (name, table) in jobs.busy.iter().map(|n| (n, "almanac.jobs")).chain(outbox.busy.iter().map(|n| (n, "almanac.outbox"))) {
        println!("  kept {name}: the lock on {table} was not granted within 2 s (a long transaction); run prune again");
    }
    Ok(if jobs.busy.is_empty() && outbox.busy.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
