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
            for grant in almanac::clients::list(&client).await? {
                match grant.plugin {
                    Some(plugin) => println!("{}: {} (plugin {plugin}, as its describe() declares)", grant.role, grant.task),
                    None => println!("{}: {}", grant.role, grant.task),
                }
            }
        }
        Some(ClientsCommand::Allow { role, task }) => {
            almanac::clients::allow(&mut client, &role, &task).await?;
            println!("{role} may enqueue into {task}");
        }
        Some(ClientsCommand::Revoke { role, task }) => {
            let n = almanac::clients::revoke(&client, &role, &task).await?;
            return Ok(super::matched(n, format!("{role} may no longer enqueue into {task}"), || {
                format!("{role} was not given {task}: nothing revoked (almanac clients lists who was)")
            }));
        }
    }
    Ok(ExitCode::SUCCESS)
}
