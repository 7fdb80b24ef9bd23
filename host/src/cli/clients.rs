//! `almanac clients`: which roles may enqueue into which tasks (besides `almanac_client`,
//! which may enqueue into all); `allow ROLE TASK` and `revoke ROLE TASK` change it.
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ClientsArgs {
    #[command(subcommand)]
    command: Option<ClientsCommand>,
}

#[derive(clap::Subcommand)]
enum ClientsCommand {
    /// Let ROLE (an application's login, or a group of them) enqueue into TASK.
    Allow { role: String, task: String },
    /// Take TASK from ROLE's tasks.
    Revoke { role: String, task: String },
}

pub async fn run(database: &super::database::Database, args: ClientsArgs) -> anyhow::Result<ExitCode> {
    let (mut client, _conn) = database.connect().await?;
    match args.command {
        None => {
            println!("almanac_client: every task");
            for (role, task) in almanac::clients::list(&client).await? {
                println!("{role}: {task}");
            }
        }
        Some(ClientsCommand::Allow { role, task }) => {
            almanac::clients::allow(&mut client, &role, &task).await?;
            println!("{role} may enqueue into {task}");
        }
        Some(ClientsCommand::Revoke { role, task }) => {
            let n = almanac::clients::revoke(&client, &role, &task).await?;
            println!("{role} {} enqueue into {task}", if n == 1 { "may no longer" } else { "could not" });
        }
    }
    Ok(ExitCode::SUCCESS)
}
