//! `almanac changes`: the record of every deliberate change, newest first.
use std::process::ExitCode;

use almanac::scheduler::operate;
use almanac::text::printable;

#[derive(clap::Args)]
pub struct ChangesArgs {
    /// Only the changes of this task.
    #[arg(long, conflicts_with = "topic")]
    task: Option<String>,
    /// Only the changes of this outbox topic.
    #[arg(long)]
    topic: Option<String>,
    #[arg(long, default_value_t = 50)]
    limit: i64,
    /// One JSON object per change, one per line.
    #[arg(long)]
    json: bool,
}

pub async fn run(database: &super::database::Database, args: ChangesArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let rows = operate::changes(&client, args.task.as_deref(), args.topic.as_deref(), None, args.limit).await?;
    if args.json {
        for change in rows {
            println!("{}", serde_json::to_string(&change)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let subjects: Vec<String> = rows.iter().map(|c| printable(c.task.as_deref().or(c.topic.as_deref()).unwrap_or("-")).into_owned()).collect();
    let width = subjects.iter().map(|s| s.chars().count()).chain([7]).max().unwrap_or(7);
    println!("{:<20} {:<width$} {:<18} {:<16}  WHAT / WHY / FROM", "AT (UTC)", "SUBJECT", "ACTION", "BY");
    for (c, subject) in rows.iter().zip(&subjects) {
        let what = match (&c.before, &c.after) {
            (Some(before), Some(after)) => format!("{} -> {}", compact(before), compact(after)),
            (None, Some(after)) => compact(after),
            (Some(before), None) => format!("was {}", compact(before)),
            (None, None) => String::new(),
        };
        let why = c.reason.as_deref().map(|r| format!(" / {}", printable(r))).unwrap_or_default();
        println!(
            "{:<20} {:<width$} {:<18} {:<16}  {what}{why} / {}",
            c.at.format("%Y-%m-%d %H:%M:%S"),
            subject,
            c.action,
            printable(&c.by_role),
            printable(&c.origin)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A change's JSON on one line, nulls left out, clipped at 160 bytes.
fn compact(v: &serde_json::Value) -> String {
    let v = match v {
        serde_json::Value::Object(m) => serde_json::Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect()),
        v => v.clone(),
    };
    almanac::text::clip(printable(&v.to_string()).into_owned(), 160)
}
