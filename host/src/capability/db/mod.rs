//! The WIT `db` interface: the `transaction` resource a call is lent.
//!
//! Every statement runs on the connection of the job (or planning step) that made the
//! call, inside the host's open transaction. The resource itself carries nothing: the
//! state lives in [`Session`], which exists only for the duration of one call.
pub mod policy;
pub mod value;

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use futures_util::future::try_join;
use tokio_postgres::NoTls;
use wasmtime::component::Resource;

use crate::bindings::almanac::plugin::db::{Host, HostTransaction};
use crate::bindings::almanac::plugin::types::{DbError, Rows, Value};
use crate::plugin::HostState;
pub use policy::Policy;

/// The rep of the WIT `transaction` resource.
pub struct Transaction;

/// Distinct statement texts kept prepared per connection before the cache is reset, so
/// a plugin generating unique SQL cannot grow a connection without bound.
const STATEMENT_CACHE_LIMIT: usize = 256;

/// How long a cancelled statement may take to report its cancellation.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

pub(crate) enum Op {
    Query,
    Execute,
}

pub(crate) enum Output {
    Rows(Vec<tokio_postgres::Row>),
    Count(u64),
}

/// What a call's `transaction` is backed by.
#[derive(Clone)]
pub enum Lent {
    /// Nothing: `describe()` gets no database.
    Nothing,
    /// The job's (or planning step's) connection, inside its open transaction.
    Conn(Arc<Object>),
    /// Statements are checked and then answered without a database (every `execute`
    /// affects one row, every `query` returns none): for measuring the host's own cost
    /// per call in `almanac bench`.
    Noop,
}

/// Whose statement a [`Session`] sends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The plugin's: checked by the statement policy, run under the plugin's role.
    Plugin,
    /// The host's own on the plugin's behalf (an outbox insert): run as the host.
    Host,
}

/// The database side of one plugin call.
pub struct Session {
    conn: Lent,
    deadline: Instant,
    policy: Arc<Policy>,
    /// The plugin's database role; none only for `describe()` and the benchmark.
    role: Option<Arc<crate::access::Role>>,
    /// `SET LOCAL ROLE` has been sent in this call. The host undoes it (RESET ROLE, or
    /// ROLLBACK TO the job's savepoint) before its own statements.
    pub role_active: bool,
    /// The first statement error of this call. PostgreSQL aborts the transaction on any
    /// error, so the call has failed whatever the plugin does next.
    pub failure: Option<DbError>,
    /// The call hit its deadline while waiting for the database.
    pub deadline_hit: bool,
    /// The connection can no longer be trusted (lost, or a cancel went unanswered).
    pub broken: bool,
}

impl Session {
    pub fn new(conn: Lent, deadline: Instant, policy: Arc<Policy>, role: Option<Arc<crate::access::Role>>) -> Self {
        Session { conn, deadline, policy, role, role_active: false, failure: None, deadline_hit: false, broken: false }
    }

    pub(crate) async fn run(&mut self, sql: String, params: Vec<Value>, op: Op, who: Who) -> wasmtime::Result<Result<Output, DbError>> {
        if let Some(first) = &self.failure {
            return Ok(Err(DbError {
                sqlstate: first.sqlstate.clone(),
                message: format!("transaction is aborted by an earlier error: {}", first.message),
                retryable: first.retryable,
            }));
        }
        if who == Who::Plugin {
            if let Err(refusal) = self.policy.check(&sql) {
                return Ok(Err(self.fail(DbError { sqlstate: refusal.sqlstate(), message: refusal.to_string(), retryable: false })));
            }
        }
        let conn = match &self.conn {
            Lent::Conn(conn) => conn.clone(),
            Lent::Noop => {
                return Ok(Ok(match op {
                    Op::Query => Output::Rows(Vec::new()),
                    Op::Execute => Output::Count(1),
                }))
            }
            Lent::Nothing => {
                return Ok(Err(self.fail(DbError {
                    sqlstate: None,
                    message: "no transaction is open during describe()".into(),
                    retryable: false,
                })))
            }
        };
        // The role switches this statement needs, sent in the same round trip: the
        // plugin's role before its first statement; for the host's own statement, the
        // host's role before it and the plugin's again after it.
        let role = self.role.clone();
        let (before, after) = match (who, &role, self.role_active) {
            (Who::Plugin, Some(role), false) => (Some(role.set.as_str()), None),
            (Who::Host, Some(role), true) => (Some("RESET ROLE"), Some(role.set.as_str())),
            _ => (None, None),
        };
        let params: Vec<value::Param> = params.iter().map(value::Param).collect();
        let refs: Vec<&(dyn postgres_types::ToSql + Sync)> =
            params.iter().map(|p| p as &(dyn postgres_types::ToSql + Sync)).collect();
        let statement = async {
            if conn.statement_cache.size() > STATEMENT_CACHE_LIMIT {
                conn.statement_cache.clear();
            }
            // Parsed after the switch: name lookup (schema privileges) is checked then.
            let statement = conn.prepare_cached(&sql).await?;
            let output = match op {
                Op::Query => conn.query(&statement, &refs).await.map(Output::Rows),
                Op::Execute => conn.execute(&statement, &refs).await.map(Output::Count),
            };
            match after {
                Some(switch) => try_join(async { output }, conn.batch_execute(switch)).await.map(|(o, _)| o),
                None => output,
            }
        };
        let work = async {
            match before {
                // Polled first, so sent first: the switch precedes the statement.
                Some(switch) => try_join(conn.batch_execute(switch), statement).await.map(|(_, o)| o),
                None => statement.await,
            }
        };
        tokio::pin!(work);
        let outcome = match tokio::time::timeout_at(self.deadline.into(), &mut work).await {
            Ok(outcome) => outcome,
            Err(_) => {
                // Cancel on the server and wait for the statement to say so, so the
                // connection is in a known state for the host's ROLLBACK TO SAVEPOINT.
                self.deadline_hit = true;
                let _ = conn.cancel_token().cancel_query(NoTls).await;
                if tokio::time::timeout(CANCEL_GRACE, &mut work).await.is_err() {
                    self.broken = true;
                }
                return Err(wasmtime::format_err!("deadline exceeded while waiting for the database"));
            }
        };
        match outcome {
            Ok(v) => {
                if who == Who::Plugin && before.is_some() {
                    self.role_active = true;
                }
                Ok(Ok(v))
            }
            Err(e) => {
                if e.is_closed() {
                    self.broken = true;
                }
                let mut error = db_error(&e);
                if let (Some("42501"), Some(role)) = (error.sqlstate.as_deref(), &role) {
                    error.message.push_str(&format!(
                        " (the plugin runs as role {}, which may use only the tables its describe() declares)",
                        role.name
                    ));
                }
                Ok(Err(self.fail(error)))
            }
        }
    }

    pub(crate) fn fail(&mut self, e: DbError) -> DbError {
        self.failure.get_or_insert_with(|| e.clone());
        e
    }
}

/// A tokio-postgres error as the plugin sees it.
pub fn db_error(e: &tokio_postgres::Error) -> DbError {
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code().to_owned();
            let mut message = db.message().to_owned();
            if let Some(detail) = db.detail() {
                message.push_str(": ");
                message.push_str(detail);
            }
            DbError { retryable: retryable_sqlstate(&code), sqlstate: Some(code), message }
        }
        None if e.is_closed() => DbError {
            sqlstate: Some("08006".into()),
            message: format!("connection lost: {e}"),
            retryable: true,
        },
        // Parameter encoding and similar client-side errors: the plugin's input is wrong.
        None => DbError { sqlstate: None, message: crate::db::error_chain(e), retryable: false },
    }
}

/// Whether a later attempt may succeed: serialization failures and deadlocks (40),
/// connection trouble (08), resource exhaustion (53), cancels and shutdowns (57),
/// lock timeouts (55P03) and system errors (58). Everything else is the statement's
/// own fault and will fail again.
pub fn retryable_sqlstate(code: &str) -> bool {
    matches!(code.get(..2), Some("40" | "08" | "53" | "57" | "58")) || code == "55P03"
}

impl Host for HostState {}

impl crate::bindings::almanac::plugin::types::Host for HostState {}

impl HostTransaction for HostState {
    async fn query(
        &mut self,
        _tx: Resource<Transaction>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<Rows, DbError>> {
        let rows = match self.db.run(sql, params, Op::Query, Who::Plugin).await? {
            Ok(Output::Rows(rows)) => rows,
            Ok(Output::Count(_)) => unreachable!("a query returns rows"),
            Err(e) => return Ok(Err(e)),
        };
        let columns = match rows.first() {
            Some(row) => row.columns().iter().map(|c| c.name().to_owned()).collect(),
            None => Vec::new(),
        };
        let mut values = Vec::with_capacity(rows.len());
        for row in &rows {
            match value::row_values(row) {
                Ok(v) => values.push(v),
                Err(message) => {
                    return Ok(Err(self.db.fail(DbError { sqlstate: None, message, retryable: false })))
                }
            }
        }
        Ok(Ok(Rows { columns, rows: values }))
    }

    async fn execute(
        &mut self,
        _tx: Resource<Transaction>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, DbError>> {
        Ok(match self.db.run(sql, params, Op::Execute, Who::Plugin).await? {
            Ok(Output::Count(n)) => Ok(n),
            Ok(Output::Rows(_)) => unreachable!("an execute returns a count"),
            Err(e) => Err(e),
        })
    }

    async fn drop(&mut self, tx: Resource<Transaction>) -> wasmtime::Result<()> {
        self.table.delete(tx)?;
        Ok(())
    }
}
