//! `almanac status`: per task, where it stands; exit 1 when a job failed or a message died.
use std::process::ExitCode;

use almanac::status;

use super::database::Database;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// One JSON object per task, one per line.
    #[arg(long)]
    json: bool,
}

pub async fn run(database: &Database, args: StatusArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let statuses = status::report(&client).await?;
    if args.json {
        for s in &statuses {
            println!("{}", serde_json::to_string(s)?);
        }
    } else {
        print!("{}", status::render(&statuses));
        let outside = almanac::history::outside(&client).await?;
        if outside > 0 {
            println!(
                "history: {outside} job(s) with slots outside the month partitions (more than 5 years back or 2 years ahead) wait in almanac.jobs_default"
            );
        }
    }
    if statuses.iter().any(|s| s.failed > 0 || s.outbox_dead > 0) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
