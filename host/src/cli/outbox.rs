//! `almanac outbox`: list messages; `almanac outbox retry`: send dead ones back.
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
}

#[derive(clap::Args)]
struct ListArgs {
    /// Only messages in this state.
    #[arg(long, value_parser = ["pending", "delivered", "dead"])]
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
    /// Only the message with this key.
    #[arg(long)]
    key: Option<String>,
}

pub async fn run(database: &super::database::Database, args: OutboxArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    match args.command {
        Some(OutboxCommand::Retry(r)) => {
            let n = operate::retry(&client, r.topic.as_deref(), r.key.as_deref()).await?;
            println!("{n} dead message(s) back to pending");
        }
        None => {
            let l = args.list;
            let rows = operate::list(&client, l.status.as_deref(), l.topic.as_deref(), l.limit).await?;
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
