//! `almanac logins`: the plugins' database logins (the sessions their SQL runs in);
//! `almanac logins rotate [TASK]`: give them new passwords.
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoginsArgs {
    #[command(subcommand)]
    command: Option<LoginsCommand>,
}

#[derive(clap::Subcommand)]
enum LoginsCommand {
    /// New passwords for every plugin login (or TASK's). Running hosts read the new one
    /// when a session next logs in; sessions open now stay open.
    Rotate { task: Option<String> },
}

pub async fn run(database: &super::database::Database, args: LoginsArgs) -> anyhow::Result<ExitCode> {
    let (mut client, _conn) = database.connect().await?;
    match args.command {
        None => {
            for login in almanac::login::list(&client).await? {
                println!("{:<24} {:<48} rotated {}", login.task, login.login, login.rotated_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            }
        }
        Some(LoginsCommand::Rotate { task }) => {
            let rotated = almanac::login::rotate(&mut client, task.as_deref()).await?;
            if rotated.is_empty() {
                anyhow::bail!("no plugin login to rotate{}", task.map(|t| format!(" for task {t:?}")).unwrap_or_default());
            }
            for task in rotated {
                println!("rotated the login of {task}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
