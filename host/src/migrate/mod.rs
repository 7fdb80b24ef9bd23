//! Forward-only numbered migrations from `migrations/`, applied by refinery while a
//! second connection holds the row of `almanac.migration_lock` ([`LOCK`]), so hosts
//! starting together migrate once and no plugin can hold them up (it could an advisory
//! key).
use tokio_postgres::error::SqlState;

use crate::db::Target;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// The lock's table, made if missing (idempotent; hosts may race to make it).
const LOCK: &str = include_str!("lock.sql");

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("migration failed: {0}")]
    Database(#[from] tokio_postgres::Error),
    #[error("migration failed: {0}")]
    Refinery(#[from] refinery::Error),
    #[error(
        "the database is at migration {at}, this Almanac needs {needs}; migrating needs a session, which a transaction pooler does not give: \
         give --direct-url (or run `almanac migrate` with DATABASE_URL pointing at PostgreSQL itself)"
    )]
    Pending { at: i64, needs: i64 },
    #[error(
        "the host's role {host} may not create schemas in database {database} (migrations make almanac and almanac_job): as {owner} (its owner), \
         run: GRANT CREATE ON DATABASE {database_ident} TO {host_ident}; (`almanac grants --plugins DIR` prints every statement the host's role needs)"
    )]
    NoCreate { host: String, host_ident: String, database: String, database_ident: String, owner: String },
}

/// Whether the connected role may create schemas here, with the names a refusal needs.
const MAY_CREATE: &str =
    "SELECT pg_catalog.has_database_privilege(d.oid, 'CREATE'), current_user::text, d.datname::text, pg_catalog.pg_get_userbyid(d.datdba)::text
     FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()";

/// Apply every pending migration on two connections to `target` (one migrates, one
/// holds the lock); returns the names of those applied. Refuses a database carrying a
/// migration this binary does not know (a newer Almanac ran there).
pub async fn run(target: &Target) -> Result<Vec<String>, MigrateError> {
    run_to(target, None).await
}

/// [`run`], stopping after migration `last` when given: a database as an older Almanac
/// left it, to test an upgrade from.
pub async fn run_to(target: &Target, last: Option<u32>) -> Result<Vec<String>, MigrateError> {
    let client = &mut connect(&target.role("migrate")).await?;
    let row = client.query_one(MAY_CREATE, &[]).await?;
    if !row.get::<_, bool>(0) {
        let (host, database, owner): (String, String, String) = (row.get(1), row.get(2), row.get(3));
        let (host_ident, database_ident) = (crate::db::quote_ident(&host), crate::db::quote_ident(&database));
        return Err(MigrateError::NoCreate { host, host_ident, database, database_ident, owner });
    }
    let lock = connect(&target.role("migrate lock")).await?;
    let mut tries = 0;
    // Two hosts making the table at once: one of them loses with a unique violation.
    while let Err(e) = lock.batch_execute(LOCK).await {
        tries += 1;
        if tries >= 5 || !e.code().is_some_and(|c| *c == SqlState::UNIQUE_VIOLATION || *c == SqlState::DUPLICATE_TABLE) {
            return Err(e.into());
        }
    }
    lock.batch_execute("BEGIN; SELECT 1 FROM almanac.migration_lock FOR UPDATE").await?;
    let mut tries = 0;
    let result = loop {
        tries += 1;
        match apply(client, last).await {
            // The migrations run in one transaction, rolled back whole: run them again,
            // and this time the role the other database's migration made is there.
            Err(e) if tries < 3 && lost_role_race(&e) => tracing::info!("another database of this cluster was migrated at the same time; migrating again"),
            result => break result,
        }
    };
    lock.batch_execute("COMMIT").await?;
    result
}

async fn connect(target: &Target) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = target.connect().await?;
    tokio::spawn(connection);
    Ok(client)
}

/// Roles are the cluster's, and the lock is one database's: two databases of one
/// cluster migrated at once both create the shared roles (`almanac_client`, ...), and
/// the second fails on the first one's (two tests of a plugin project did this).
fn lost_role_race(e: &MigrateError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(e) = source {
        if let Some(code) = e.downcast_ref::<tokio_postgres::Error>().and_then(tokio_postgres::Error::code) {
            return *code == tokio_postgres::error::SqlState::UNIQUE_VIOLATION || *code == tokio_postgres::error::SqlState::DUPLICATE_OBJECT;
        }
        source = e.source();
    }
    false
}

/// Through a pooler without a direct connection: refuse to run on a database whose
/// schema is behind this binary's migrations.
pub async fn check_current(client: &impl crate::db::Sql) -> Result<(), MigrateError> {
    let needs = embedded::migrations::runner().get_migrations().iter().map(|m| i64::from(m.version())).max().unwrap_or(0);
    let at: i64 = client
        .one("SELECT coalesce((SELECT max(version)::bigint FROM almanac.schema_history WHERE to_regclass('almanac.schema_history') IS NOT NULL), 0)", &[])
        .await
        .map(|row| row.get(0))
        .unwrap_or(0);
    if at < needs {
        return Err(MigrateError::Pending { at, needs });
    }
    Ok(())
}

async fn apply(client: &mut tokio_postgres::Client, last: Option<u32>) -> Result<Vec<String>, MigrateError> {
    // The history table lives in our schema, which must exist before refinery looks.
    client.batch_execute("CREATE SCHEMA IF NOT EXISTS almanac").await?;
    let mut runner = embedded::migrations::runner().set_abort_missing(true).set_grouped(true);
    runner.set_migration_table_name("almanac.schema_history");
    if let Some(last) = last {
        runner = runner.set_target(refinery::Target::Version(last));
    }
    let report = runner.run_async(client).await?;
    Ok(report.applied_migrations().iter().map(|m| m.to_string()).collect())
}
