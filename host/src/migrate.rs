//! Forward-only numbered migrations from `migrations/`, applied by refinery under an
//! advisory lock so hosts starting together migrate once.
mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// Key of the session advisory lock held while migrating ("almanac" in ASCII).
const MIGRATION_LOCK: i64 = 0x616c_6d61_6e61_63;

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("migration failed: {0}")]
    Database(#[from] tokio_postgres::Error),
    #[error("migration failed: {0}")]
    Refinery(#[from] refinery::Error),
}

/// Apply every pending migration; returns the names of those applied. Refuses a
/// database carrying a migration this binary does not know (a newer Almanac ran there).
pub async fn run(client: &mut tokio_postgres::Client) -> Result<Vec<String>, MigrateError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).await?;
    let result = apply(client).await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await?;
    result
}

async fn apply(client: &mut tokio_postgres::Client) -> Result<Vec<String>, MigrateError> {
    // The history table lives in our schema, which must exist before refinery looks.
    client.batch_execute("CREATE SCHEMA IF NOT EXISTS almanac").await?;
    let mut runner = embedded::migrations::runner().set_abort_missing(true).set_grouped(true);
    runner.set_migration_table_name("almanac.schema_history");
    let report = runner.run_async(client).await?;
    Ok(report.applied_migrations().iter().map(|m| m.to_string()).collect())
}
