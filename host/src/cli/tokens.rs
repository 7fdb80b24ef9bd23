//! `almanac token create|list|revoke`: who may sign in to the console of
//! `almanac run --listen` and call its JSON API (`almanac::operators`).
use std::process::ExitCode;

use almanac::operators::{self, Action, Role};

#[derive(clap::Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(clap::Subcommand)]
enum TokenCommand {
    /// Make a token and print it, once: only its SHA-256 is stored.
    Create {
        /// Who holds it (recorded with every action taken with it).
        #[arg(long)]
        name: String,
        /// viewer sees; operator also retries, discards, holds, releases, pauses, resumes.
        #[arg(long, value_enum)]
        role: Role,
        /// An action allowed beyond the role's (repeatable): a viewer who may retry.
        #[arg(long = "grant", value_enum)]
        grants: Vec<Action>,
    },
    /// Every token: role, grants, when made and last used, open sessions.
    List,
    /// Revoke a token: its sessions end, it signs in no more.
    Revoke { name: String },
}

pub async fn run(database: &super::database::Database, args: TokenArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    match args.command {
        TokenCommand::Create { name, role, grants } => {
            let by = almanac::scheduler::applied::origin("token create");
            let token = operators::create(&client, &name, role, &grants, &by).await?;
            eprintln!("token {name} ({}) made; it is shown once, keep it secret:", role.as_str());
            println!("{token}");
        }
        TokenCommand::List => {
            let tokens = operators::list(&client).await?;
            if tokens.is_empty() {
                println!("no tokens: `almanac token create --name NAME --role viewer|operator|admin` makes one");
            }
            for t in tokens {
                let state = match t.revoked_at {
                    Some(at) => format!("revoked {}", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                    None => format!("{} session(s)", t.sessions),
                };
                let used = t.last_used_at.map_or("never used".to_owned(), |at| format!("used {}", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)));
                let grants = if t.grants.is_empty() { String::new() } else { format!(" +{}", t.grants.join(",")) };
                println!("{:<24} {:<9}{grants} {state}, {used}, made by {}", t.name, t.role, t.created_by);
            }
        }
        TokenCommand::Revoke { name } => {
            if !operators::revoke(&client, &name).await? {
                anyhow::bail!("no live token named {name:?} (`almanac token list`)");
            }
            println!("revoked {name}: its sessions ended, it signs in no more");
        }
    }
    Ok(ExitCode::SUCCESS)
}
