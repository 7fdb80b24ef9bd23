//! `almanac outbox`: list messages; `retry` dead ones, `pause`/`resume` a topic,
//! `deliver-now`, and `discard` what is not delivered yet.
use std::process::ExitCode;

use almanac::outbox::operate;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct OutboxArgs {
    #[command(subcommand)]
    command: Option<OutboxCommand>,
    #[command(flatten)]
    list: ListArgs,
}

#[derive(clap::Subcommand)]
enum OutboxCommand {
    /// Send dead messages back to pending with a fresh count of attempts.
    Retry(RetryArgs),
    /// Stop delivering TOPIC's messages on every host; they wait pending (recorded with
    /// the reason).
    Pause(PauseArgs),
    /// Deliver TOPIC's messages again.
    Resume(PauseArgs),
    /// Make TOPIC's pending messages (or one KEY's) due now and close its circuit: for
    /// when the receiver is back.
    DeliverNow(KeyArgs),
    /// Recall TOPIC's messages not yet delivered (pending or dead; or one KEY's): they
    /// are never delivered, and stay as `discarded` with the reason.
    Discard(DiscardArgs),
}

#[derive(clap::Args)]
struct PauseArgs {
    topic: String,
    /// Why, recorded on the topic.
    #[arg(long)]
    reason: Option<String>,
}

#[derive(clap::Args)]
struct KeyArgs {
    topic: String,
    /// Only the message with this key, or this Idempotency-Key (`topic/key`, as the
    /// receiver logs it). Exits 1 when none matched.
    #[arg(long)]
    key: Option<String>,
}

#[derive(clap::Args)]
struct DiscardArgs {
    topic: String,
    /// Only the message with this key, or this Idempotency-Key (`topic/key`, as the
    /// receiver logs it). Exits 1 when nothing was discarded.
    #[arg(long)]
    key: Option<String>,
    /// Why, recorded on each message.
    #[arg(long)]
    reason: String,
}

#[derive(clap::Args)]
struct ListArgs {
    /// Only messages in this state.
    #[arg(long, value_parser = ["pending", "delivered", "dead", "discarded"])]
    status: Option<String>,
    /// Only messages of this topic.
    #[arg(long)]
    topic: Option<String>,
    #[arg(long, default_value_t = 50)]
    limit: i64,
    /// One JSON object per message, one per line.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct RetryArgs {
    /// Only dead messages of this topic.
    #[arg(long)]
    topic: Option<String>,
    /// Only the message with this key, or this Idempotency-Key (`topic/key`). Exits 1
    /// when no dead message matched.
    #[arg(long)]
    key: Option<String>,
}

pub async fn run(database: &super::database::Database, args: OutboxArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let origin = |command: &str| almanac::scheduler::applied::origin(&format!("outbox {command}"));
    match args.command {
        Some(OutboxCommand::Retry(r)) => {
            let n = operate::retry(&client, r.topic.as_deref(), r.key.as_deref(), &origin("retry")).await?;
            return Ok(super::matched(n, format!("{n} dead message(s) back to pending"), || {
                format!("no dead message matched{}", selected(r.topic.as_deref(), r.key.as_deref()))
            }));
        }
        Some(OutboxCommand::Pause(p)) => {
            anyhow::ensure!(operate::set_paused(&client, &p.topic, true, p.reason.as_deref(), &origin("pause")).await?, "no outbox topic {:?}", p.topic);
            println!("paused outbox topic {}: no host delivers its messages until `almanac outbox resume {}`", p.topic, p.topic);
        }
        Some(OutboxCommand::Resume(p)) => {
            anyhow::ensure!(operate::set_paused(&client, &p.topic, false, None, &origin("resume")).await?, "no outbox topic {:?}", p.topic);
            println!("resumed outbox topic {}", p.topic);
        }
        Some(OutboxCommand::DeliverNow(k)) => {
            let n = operate::deliver_now(&client, &k.topic, k.key.as_deref(), &origin("deliver-now")).await?;
            if k.key.is_some() {
                return Ok(super::matched(n, format!("{n} pending message(s) of {} due now; its circuit is closed", k.topic), || {
                    format!("no pending message matched{}; the circuit of {} is closed", selected(Some(&k.topic), k.key.as_deref()), k.topic)
                }));
            }
            println!("{n} pending message(s) of {} due now; its circuit is closed", k.topic);
        }
        Some(OutboxCommand::Discard(d)) => {
            let n = operate::discard(&client, &d.topic, d.key.as_deref(), &d.reason, &origin("discard")).await?;
            return Ok(super::matched(n, format!("{n} message(s) of {} discarded", d.topic), || {
                format!("nothing discarded: no pending or dead message matched{}", selected(Some(&d.topic), d.key.as_deref()))
            }));
        }
        None => {
            let l = args.list;
            let rows = operate::list(&client, l.status.as_deref(), l.topic.as_deref(), None, l.limit).await?;
            if !l.json {
                println!("{:>8} {:<20} {:<40} {:<9} {:>8} {:<20}  LAST ERROR", "ID", "TOPIC", "KEY", "STATUS", "ATTEMPTS", "NEXT TRY (UTC)");
            }
            for m in rows {
                if l.json {
                    println!("{}", serde_json::to_string(&m)?);
                } else {
                    let next = if m.status == "pending" { m.next_attempt_at.format("%Y-%m-%d %H:%M:%S").to_string() } else { "-".into() };
                    let error = m.last_error.unwrap_or_default().replace('\n', " ");
                    println!("{:>8} {:<20} {:<40} {:<9} {:>8} {:<20}  {}", m.id, m.topic, m.key, m.status, m.attempts, next, error);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The selector as the operator gave it, for a message that nothing matched.
fn selected(topic: Option<&str>, key: Option<&str>) -> String {
    let topic = topic.map(|t| format!(" topic {t:?}")).unwrap_or_default();
    let key = key.map(|k| format!(" key {:?} (a message's key, or its Idempotency-Key topic/key)", almanac::text::printable(k))).unwrap_or_default();
    format!("{topic}{key}")
}
