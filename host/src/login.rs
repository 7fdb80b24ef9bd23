//! Plugin logins: the sessions a plugin's SQL runs in. Each task has, in each database,
//! a login role of its own that is a member of the task's role ([`crate::access`]) and of
//! nothing else; the hosts make its password, keep it in `almanac.plugin_logins` and
//! share it. Every connection that runs a plugin's statements (its jobs, its plan, its
//! setup, a dry run) logs in as that role, so its *session user* holds nothing but the
//! plugin's rights. No statement, however it reaches `set_config('role', ...)`, can make
//! such a session the host: the host is not a role the session user is a member of.
//!
//! The login is per database (its name carries a digest of the database's), because role
//! names are the cluster's: two Almanac databases on one server, each with a task of the
//! same name, would otherwise keep replacing each other's password.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::db::{Conn, Pool};

use crate::db::{Sql, Target};

const CREDENTIALS: &str = "SELECT login, password FROM almanac.plugin_logins WHERE task = $1";
const STORE: &str = "INSERT INTO almanac.plugin_logins (login, task, password) VALUES ($1, $2, $3)
     ON CONFLICT (login) DO UPDATE SET task = EXCLUDED.task, password = EXCLUDED.password, rotated_at = now()";
/// Whether the login exists as a role, can log in, has its password recorded here, and
/// is a member of the task's role ($3).
const LOGIN_STATE: &str = "SELECT r.rolcanlogin, EXISTS (SELECT 1 FROM almanac.plugin_logins l WHERE l.login = r.rolname AND l.task = $2),
            EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles t ON t.oid = m.roleid WHERE m.member = r.oid AND t.rolname = $3)
     FROM pg_roles r WHERE r.rolname = $1";
/// Whether the host's role sees the login's sessions whole in pg_stat_activity (their
/// `backend_start`, which names a claim's connection): a member of the login does.
const SEES_LOGIN: &str = "SELECT pg_catalog.pg_has_role(current_user, $1, 'USAGE')";

/// Sent after a transaction in a plugin's session ends: whatever its statements may have
/// left on the session past it (through a function the statement policy did not see
/// into): session advisory locks, cursors held open, LISTEN, temporary tables, settings,
/// and large objects its login (or its task's role) owns, which a committed job would
/// otherwise leave in the database for good. The session is the plugin's own, so this
/// keeps one job's leftovers from its task's next jobs, and from blocking the host (a
/// session advisory lock once outlived its job).
pub const CLEAN: &str = "SELECT pg_advisory_unlock_all(); SELECT almanac_job.unlink_large_objects(); CLOSE ALL; UNLISTEN *; DISCARD TEMP; RESET ALL";

/// Idle plugin sessions older than this are closed (a task that ran once an hour keeps
/// no connection open in between).
const IDLE: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("task {task} has no login yet (a host makes one when it loads the plugin)")]
    Missing { task: String },
    #[error("cannot log in as task {task}'s role: {reason}")]
    Connect { task: String, reason: String },
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

impl LoginError {
    /// The database (or the way to it) failing, rather than a missing login.
    pub fn transient(&self) -> bool {
        match self {
            LoginError::Missing { .. } => false,
            LoginError::Connect { .. } => true,
            LoginError::Db(e) => crate::db::is_transient(e),
        }
    }
}

/// A fresh random password: 32 bytes of the OS's randomness, hex-encoded.
pub fn new_password() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The login role of `task` in `database`: at most 63 bytes, distinct per (database, task).
pub fn login_name(task: &str, database: &str) -> String {
    crate::access::scoped_name("almanac_login_", '_', task, database)
}

/// Make `task`'s login in this database (a member of `role`, the task's role, alone)
/// with a password the hosts share, unless it is ready already (`rotate`: give it a new
/// password either way). The password reaches the server only as a SCRAM-SHA-256
/// verifier, so no server log can show it. Runs inside the caller's transaction, which
/// holds the setup lock.
/// Returns the login's name.
pub async fn ensure(tx: &(impl tokio_postgres::GenericClient + Sql), task: &str, role: &str, rotate: bool) -> Result<String, tokio_postgres::Error> {
    let database = crate::db::database_name(tx).await?;
    let login = login_name(task, &database);
    let state = tx.opt(LOGIN_STATE, &[&login, &task, &role]).await?.map(|row| (row.get::<_, bool>(0), row.get::<_, bool>(1), row.get::<_, bool>(2)));
    if let (Some((true, true, member)), false) = (state, rotate) {
        // A login may set its own session defaults (`ALTER ROLE CURRENT_USER SET
        // work_mem = ...`), which would outlive RESET ALL and every session: gone at
        // each load.
        tx.batch_execute(&format!("ALTER ROLE {} RESET ALL", crate::db::quote_ident(&login))).await?;
        if !member {
            // The task's role is new (per database since V18's version).
            tx.batch_execute(&format!("GRANT {} TO {}", crate::db::quote_ident(role), crate::db::quote_ident(&login))).await?;
        }
        see_sessions(tx, &login).await?;
        return Ok(login);
    }
    let password = new_password();
    let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
    let (login_q, role_q) = (crate::db::quote_ident(&login), crate::db::quote_ident(role));
    let statement = match state {
        None => format!("CREATE ROLE {login_q} LOGIN INHERIT PASSWORD '{verifier}' IN ROLE {role_q}"),
        Some(_) => format!("ALTER ROLE {login_q} LOGIN INHERIT PASSWORD '{verifier}'; GRANT {role_q} TO {login_q}"),
    };
    tx.batch_execute(&statement).await?;
    tx.exec(STORE, &[&login, &task, &password]).await?;
    see_sessions(tx, &login).await?;
    Ok(login)
}

/// Make the host's role a member of `login`, so that it sees the login's sessions in
/// pg_stat_activity with their start (a role that is not sees them without it): the
/// claims a batch on such a session records are told live from orphaned by it, and
/// `status` counts the jobs running there. It gives the host nothing else: the login
/// holds only the task's role, of which the host is a member already.
async fn see_sessions(tx: &(impl tokio_postgres::GenericClient + Sql), login: &str) -> Result<(), tokio_postgres::Error> {
    if !tx.one(SEES_LOGIN, &[&login]).await?.get::<_, bool>(0) {
        tx.batch_execute(&format!("GRANT {} TO CURRENT_USER", crate::db::quote_ident(login))).await?;
    }
    Ok(())
}

/// One plugin login, as `almanac logins` lists it.
pub struct Login {
    pub task: String,
    pub login: String,
    pub rotated_at: chrono::DateTime<chrono::Utc>,
}

/// Every plugin login of this database.
pub async fn list(client: &impl Sql) -> Result<Vec<Login>, tokio_postgres::Error> {
    let rows = client.rows("SELECT task, login, rotated_at FROM almanac.plugin_logins ORDER BY task", &[]).await?;
    Ok(rows.iter().map(|r| Login { task: r.get("task"), login: r.get("login"), rotated_at: r.get("rotated_at") }).collect())
}

/// New passwords for every login (or `task`'s), in one transaction; returns the tasks.
pub async fn rotate(client: &mut tokio_postgres::Client, task: Option<&str>) -> Result<Vec<String>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let tasks: Vec<String> = list(&tx).await?.into_iter().map(|l| l.task).filter(|t| task.is_none_or(|only| only == t)).collect();
    let database = crate::db::database_name(&tx).await?;
    for task in &tasks {
        ensure(&tx, task, &crate::access::role_name(task, &database), true).await?;
    }
    tx.commit().await?;
    Ok(tasks)
}

/// Every task's pool of sessions as its login, made on first use.
pub struct Logins {
    target: Target,
    host: Pool,
    size: usize,
    pools: Mutex<HashMap<String, Pool>>,
}

impl Logins {
    /// Sessions to `target` (the host's own, its user replaced), credentials read through
    /// `host`, at most `size` per task.
    pub fn new(target: &Target, host: Pool, size: usize) -> Arc<Logins> {
        Arc::new(Logins { target: target.clone(), host, size, pools: Mutex::new(HashMap::new()) })
    }

    /// A session of `task`'s login. A password rotated meanwhile is read again; one
    /// refused even so (a plugin may change its own login's password, locking the hosts
    /// out) is replaced by a new one.
    pub async fn get(&self, task: &str) -> Result<Conn, LoginError> {
        let refused = |e: crate::db::PoolError| LoginError::Connect { task: task.to_owned(), reason: crate::db::error_chain(&e) };
        match self.pool(task).await?.get().await {
            Ok(conn) => return Ok(conn),
            Err(e) if is_auth(&e) => self.forget(task),
            Err(e) => return Err(refused(e)),
        }
        match self.pool(task).await?.get().await {
            Ok(conn) => return Ok(conn),
            Err(e) if is_auth(&e) => {
                tracing::warn!(task, "the login's recorded password is refused: giving it a new one");
                let mut host = self.host.get().await.map_err(refused)?;
                rotate(&mut host, Some(task)).await?;
                self.forget(task);
            }
            Err(e) => return Err(refused(e)),
        }
        self.pool(task).await?.get().await.map_err(refused)
    }

    /// A session of another login than `task`'s own (a dry run's), closed when dropped.
    pub async fn session_as(&self, task: &str, login: &str, password: &str) -> Result<Conn, LoginError> {
        let refused = |reason: String| LoginError::Connect { task: task.to_owned(), reason };
        let mut target = self.target.role(&format!("plugin {task} (dry run)"));
        target.config.user(login).password(password);
        let pool = Pool::new(&target, 1).map_err(|e| refused(e.to_string()))?;
        pool.get().await.map_err(|e| refused(crate::db::error_chain(&e)))
    }

    /// Drop `task`'s pool (its login changed): the next [`Logins::get`] reads it anew.
    pub fn forget(&self, task: &str) {
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).remove(task);
    }

    /// Close sessions idle for a while, in every task's pool.
    pub fn close_idle(&self) {
        for pool in self.pools.lock().unwrap_or_else(|e| e.into_inner()).values() {
            pool.retain(|metrics| metrics.last_used() < IDLE);
        }
    }

    async fn pool(&self, task: &str) -> Result<Pool, LoginError> {
        if let Some(pool) = self.pools.lock().unwrap_or_else(|e| e.into_inner()).get(task) {
            return Ok(pool.clone());
        }
        let host = self.host.get().await.map_err(|e| LoginError::Connect { task: task.to_owned(), reason: crate::db::error_chain(&e) })?;
        let row = host.opt(CREDENTIALS, &[&task]).await?.ok_or_else(|| LoginError::Missing { task: task.to_owned() })?;
        let (login, password): (String, String) = (row.get(0), row.get(1));
        let mut target = self.target.role(&format!("plugin {task}"));
        target.config.user(&login).password(password);
        let pool = crate::db::Pool::new(&target, self.size).map_err(|e| LoginError::Connect { task: task.to_owned(), reason: e.to_string() })?;
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).insert(task.to_owned(), pool.clone());
        Ok(pool)
    }
}

/// A refused password (28P01) or login (28000).
fn is_auth(e: &crate::db::PoolError) -> bool {
    match e {
        crate::db::PoolError::Backend(pg) => pg.code().is_some_and(|c| c.code().starts_with("28")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_names_fit_postgres_and_stay_distinct() {
        assert_eq!(login_name("daily-points", "almanac").len(), "almanac_login_daily-points_".len() + 8);
        for task in ["a".repeat(40), "a".repeat(63), format!("{}é", "a".repeat(40))] {
            assert!(login_name(&task, "almanac").len() <= 63, "{task}");
        }
        assert_ne!(login_name(&"a".repeat(64), "db"), login_name(&format!("{}b", "a".repeat(63)), "db"));
        assert_ne!(login_name("t", "one"), login_name("t", "two"), "per database");
        // A short task named like a long one's shortened form gets another login.
        let long = "b".repeat(50);
        let shortened = login_name(&long, "db");
        let lookalike = shortened["almanac_login_".len()..shortened.len() - 9].replace('.', "_");
        assert_ne!(login_name(&lookalike, "db"), shortened);
    }
}
