//! Connections: where to connect (`target`, read by libpq's rules in `conninfo`), the
//! pool every component shares, the session settings that bound a stuck transaction,
//! and waiting for a database that is not up yet.
pub mod conninfo;
mod error;
mod pool;
pub mod refusal;
mod sql;
mod target;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use deadpool_postgres::PoolError;
pub use error::{error_chain, is_transient, DbError};
pub use pool::{Conn, Pool};
pub use sql::{Param, Prepared, Sql, Typed};
pub use target::{plain, SslMode, Target, Tls};

/// Session settings of every host connection.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// Longest any single statement may run. Defaults to 5 minutes.
    pub statement_timeout: Duration,
    /// Longest a transaction may sit idle (e.g. a host frozen mid-job) before the
    /// server ends it and releases its locks. Defaults to 5 minutes.
    pub idle_in_transaction_timeout: Duration,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings { statement_timeout: Duration::from_secs(300), idle_in_transaction_timeout: Duration::from_secs(300) }
    }
}

/// `url` (a `postgres://` URL, `key=value` pairs, or empty for the `PG*` environment)
/// with the host's session settings, unless it leads through a transaction pooler
/// (`pooled`), which refuses (or would share) session settings: they are the role's or
/// the server's there (see check_pooled_settings).
pub fn config(url: &str, pooled: bool, settings: &SessionSettings) -> Result<Target, DbError> {
    match pooled {
        true => {
            let mut target = Target::new(url)?;
            target.pooled = true;
            Ok(target)
        }
        false => direct(url, settings),
    }
}

/// `url` straight to PostgreSQL, with the host's session settings.
pub fn direct(url: &str, settings: &SessionSettings) -> Result<Target, DbError> {
    let mut target = Target::new(url)?;
    // client_connection_check_interval makes the server notice a host that died while
    // its statement runs (e.g. in pg_sleep), so the job's row lock is released promptly.
    // jit=off: the host's statements are short, and the planner's cost estimates over a
    // large partitioned history cross jit_above_cost, where compiling a statement (status
    // counts, 400+ functions) took 150 ms to save nothing.
    let ours = format!(
        "-c statement_timeout={} -c idle_in_transaction_session_timeout={} -c client_connection_check_interval=1000 -c jit=off",
        settings.statement_timeout.as_millis(),
        settings.idle_in_transaction_timeout.as_millis()
    );
    let options = match target.config.get_options() {
        Some(theirs) if !theirs.is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    target.config.options(options);
    Ok(target)
}

/// Through a transaction pooler the host cannot set its session settings; say once at
/// start which bounds the server does not give, and how to give them.
pub async fn check_pooled_settings(client: &impl Sql) -> Result<(), tokio_postgres::Error> {
    let row =
        client.one("SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('statement_timeout'), current_user::text", &[]).await?;
    let (idle, statement, user): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    for (name, value, why) in [
        ("idle_in_transaction_session_timeout", idle, "a frozen host keeps its jobs' row locks"),
        ("statement_timeout", statement, "a stuck statement is not ended by the server"),
    ] {
        if value == "0" {
            tracing::warn!(
                "through a pooler Almanac cannot set {name}, and the server has none: {why}; set it for the role: ALTER ROLE {} SET {name} = '5min'",
                quote_ident(&user)
            );
        }
    }
    Ok(())
}

/// A connection from the pool, waiting with backoff while the database is unreachable.
/// Only shutdown ends the wait: a database that blinks is not a reason to exit.
pub async fn connect(pool: &Pool, shutdown: &CancellationToken) -> Result<Conn, DbError> {
    let mut delay = Duration::from_millis(100);
    let mut logged = false;
    loop {
        match pool.get().await {
            Ok(conn) => {
                if logged {
                    tracing::info!("database reachable again");
                }
                return Ok(conn);
            }
            Err(e) => {
                tracing::warn!(retry_in = ?delay, "database unavailable: {}", error_chain(&e));
                logged = true;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return Err(DbError::ShutDown),
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Drop a connection that may be mid-transaction (or carry a cancel request) instead of
/// returning it to its pool.
pub fn discard(conn: std::sync::Arc<Conn>) {
    if let Ok(conn) = std::sync::Arc::try_unwrap(conn) {
        conn.close();
    }
}

/// The server's clock (`now()`): what "due" means is the database's time, not a host's.
pub async fn server_now(client: &tokio_postgres::Client) -> Result<chrono::DateTime<chrono::Utc>, tokio_postgres::Error> {
    Ok(client.query_one("SELECT now()", &[]).await?.get(0))
}

/// The database a connection is in, as the server names it (through a pooler's alias too):
/// roles and logins carry it.
pub async fn database_name(client: &impl Sql) -> Result<String, tokio_postgres::Error> {
    Ok(client.one("SELECT current_database()::text", &[]).await?.get(0))
}

/// `name` as a quoted SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// This machine's name, for the records of who did what (claims, changes).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "unknown".into())
}

/// This process as the host tables name it (`almanac.claims`, `almanac.hosts`).
pub fn this_host() -> String {
    format!("{} pid {}", hostname(), std::process::id())
}
