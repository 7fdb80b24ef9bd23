//! Applications' right to enqueue: `almanac_client` may enqueue into every task; a role
//! given tasks one by one (`almanac clients allow ROLE TASK`) into those alone
//! (`almanac.check_enqueue`, migration V10, checks it in the database).
use crate::db::{quote_ident, Sql};

const ALLOW: &str = include_str!("allow.sql");
const REVOKE: &str = include_str!("revoke.sql");
const LIST: &str = include_str!("list.sql");

/// Let `role` enqueue into `task` (it becomes a member of `almanac_enqueuer`, which may
/// call the enqueue functions and nothing else).
pub async fn allow(client: &mut tokio_postgres::Client, role: &str, task: &str) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.batch_execute(&format!("GRANT almanac_enqueuer TO {}", quote_ident(role))).await?;
    tx.exec(ALLOW, &[&role, &task]).await?;
    tx.commit().await
}

/// Take `task` from `role`'s tasks (its other tasks stay).
pub async fn revoke(client: &impl Sql, role: &str, task: &str) -> Result<u64, tokio_postgres::Error> {
    client.exec(REVOKE, &[&role, &task]).await
}

/// (role, task) for every task given to a role one by one.
pub async fn list(client: &impl Sql) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    Ok(client.rows(LIST, &[]).await?.iter().map(|r| (r.get("grantee"), r.get("task"))).collect())
}
