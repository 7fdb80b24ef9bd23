//! Applications' right to enqueue: `almanac_client` may enqueue into every task; a role
//! given tasks one by one (`almanac clients allow ROLE TASK`) into those alone
//! (`almanac.check_enqueue`, migration V10, checks it in the database).
use crate::db::{quote_ident, Sql};

const ALLOW: &str = include_str!("allow.sql");
const REVOKE: &str = include_str!("revoke.sql");
const LIST: &str = include_str!("list.sql");
const PLUGINS: &str = include_str!("plugins.sql");

/// Let `role` enqueue into `task` (it becomes a member of `almanac_enqueuer`, which may
/// call the enqueue functions and nothing else).
pub async fn allow(client: &mut tokio_postgres::Client, role: &str, task: &str) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.batch_execute(&format!("GRANT almanac_enqueuer TO {}", quote_ident(role))).await?;
    tx.exec(ALLOW, &[&role, &task]).await?;
    tx.commit().await
}

/// Take `task` from `role`'s tasks (its other tasks stay). A plugin's own role is not
/// the operator's to change: its rights are what its `describe()` declares, granted again
/// at every load.
pub async fn revoke(client: &impl Sql, role: &str, task: &str) -> Result<u64, ClientsError> {
    if let Some(plugin) = plugin_roles(client).await?.into_iter().find(|(r, _)| r == role).map(|(_, p)| p) {
        return Err(ClientsError::PluginRole { role: role.to_owned(), plugin });
    }
    Ok(client.exec(REVOKE, &[&role, &task]).await?)
}

/// One role's right to enqueue into one task.
pub struct Grant {
    pub role: String,
    pub task: String,
    /// The plugin whose role it is (its `enqueues` declaration), if it is one's.
    pub plugin: Option<String>,
}

/// Every task given to a role one by one: applications' by `allow`, plugins' by their
/// declarations.
pub async fn list(client: &impl Sql) -> Result<Vec<Grant>, ClientsError> {
    let plugins = plugin_roles(client).await?;
    let rows = client.rows(LIST, &[]).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let role: String = r.get("grantee");
            let plugin = plugins.iter().find(|(p, _)| *p == role).map(|(_, name)| name.clone());
            Grant { role, task: r.get("task"), plugin }
        })
        .collect())
}

/// (role, plugin) for every plugin registered in this database.
async fn plugin_roles(client: &impl Sql) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let database = crate::db::database_name(client).await?;
    let names = client.rows(PLUGINS, &[]).await?;
    Ok(names.iter().map(|r| r.get::<_, String>(0)).map(|name| (crate::access::role_name(&name, &database), name)).collect())
}

#[derive(Debug, thiserror::Error)]
pub enum ClientsError {
    #[error(
        "{role} is the role of plugin {plugin}: it may enqueue into what its describe() declares (enqueues), granted again at every load; ship a version that no longer declares it"
    )]
    PluginRole { role: String, plugin: String },
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}
