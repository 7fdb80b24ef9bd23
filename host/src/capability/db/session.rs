//! The database side of one plugin call: the call's connection (a session of the
//! plugin's own login), the deadline, the result budget and the first error. Every statement a plugin sends, and
//! every statement the host sends on its behalf (an outbox insert), goes through here.
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::Conn;
use futures_util::{pin_mut, TryStreamExt};
use postgres_types::ToSql;

use super::policy::Policy;
use super::value;
use crate::bindings::almanac::plugin::types::{DbError, Rows, Value};

/// Distinct statement texts kept prepared per connection before the cache is reset, so
/// a plugin generating unique SQL cannot grow a connection without bound.
const STATEMENT_CACHE_LIMIT: usize = 256;

/// Longer statements are never kept prepared: with [`STATEMENT_CACHE_LIMIT`] this bounds
/// what one connection's cache can hold in the server's memory (400 distinct 60 KB
/// statements per job once grew backends past 1 GB).
const CACHED_STATEMENT_BYTES: usize = 4096;

/// Outbox messages one call may publish, and their payloads' bytes in all.
pub const MAX_PUBLISHES: usize = 100;
pub const MAX_PUBLISHED_BYTES: usize = 16 << 20;

/// How long a cancelled statement may take to report its cancellation.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// How long a cancel is given before it is sent again (doubling each time).
const CANCEL_RESEND: Duration = Duration::from_millis(100);

/// Undoes what a plugin's call may have left on its session: any setting changed
/// through a function (the reset value of each is the one given when the session
/// connected). Sent by whoever ends a call that succeeded; a failed call is undone by
/// rolling back to its savepoint.
pub const END_CALL: &str = "RESET ALL";

/// What a call's `transaction` is backed by.
#[derive(Clone)]
pub enum Lent {
    /// Nothing: `describe()` gets no database.
    Nothing,
    /// The job's (or planning step's) connection, inside its open transaction.
    Conn(Arc<Conn>),
    /// Statements are checked and then answered without a database (every `execute`
    /// affects one row, every `query` returns none): for measuring the host's own cost
    /// per call in `almanac bench`.
    Noop,
}

/// Whose statement a [`Session`] sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The plugin's: checked by the statement policy.
    Plugin,
    /// The host's own on the plugin's behalf (an outbox message, through
    /// `almanac_job.publish`): not checked by the policy; the session is the plugin's
    /// all the same.
    Host,
}

/// How a call on this session ended, for the caller to decide what to do with the
/// connection and the job.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// The first statement error of this call. PostgreSQL aborts the transaction on any
    /// error, so the call has failed whatever the plugin does next.
    pub failure: Option<DbError>,
    /// The call hit its deadline while waiting for the database.
    pub deadline_hit: bool,
    /// A cancel request was sent on the connection; a late one could land on a later
    /// statement, so the connection should be replaced.
    pub cancel_sent: bool,
    /// The connection can no longer be trusted (lost, or a cancel went unanswered).
    pub broken: bool,
    /// The plugin sent a statement: [`END_CALL`] must follow before its next job.
    pub used: bool,
}

/// The database side of one plugin call.
pub struct Session {
    /// The task the call is for (empty for `describe()`): what an outbox message records.
    pub task: String,
    conn: Lent,
    deadline: Instant,
    policy: Arc<Policy>,
    /// The plugin's database role (its session's user); none only for `describe()`.
    role: Option<Arc<crate::access::Role>>,
    /// Bytes of rows one query may return: the plugin's memory cap, since a larger
    /// result could never be handed to it anyway.
    result_budget: usize,
    /// How a cancel request reaches the server.
    cancel_tls: crate::db::Tls,
    ending: Ending,
    /// Messages published in this call, and their payloads' bytes.
    published: (usize, usize),
    /// Every statement of the call, when asked for (`almanac try`): the first
    /// [`TRACE_KEPT`], then only a count, so a plugin looping until its deadline cannot
    /// grow the host's memory with its statements.
    trace: Option<Trace>,
}

/// Statements a dry run keeps, how much of each statement's text, and how many of its
/// parameters (a call may pass millions within its memory cap).
pub const TRACE_KEPT: usize = 1000;
const TRACE_SQL_BYTES: usize = 4096;
const TRACE_PARAMS: usize = 100;

/// One statement a call sent, as a dry run shows it.
#[derive(Debug, Clone)]
pub struct Traced {
    pub who: Who,
    pub sql: String,
    /// The parameters, each as text (clipped).
    pub params: Vec<String>,
    /// `3 rows`, `1 row affected`, or the error.
    pub outcome: String,
    pub elapsed: std::time::Duration,
}

/// What a traced call sent: the first [`TRACE_KEPT`] statements, and a count of the rest.
#[derive(Debug, Default)]
pub struct Trace {
    pub statements: Vec<Traced>,
    pub untraced: usize,
}

impl Trace {
    /// `more` after these, still keeping at most [`TRACE_KEPT`] (`plan`'s pages).
    pub fn extend(&mut self, more: Trace) {
        let room = TRACE_KEPT.saturating_sub(self.statements.len());
        self.untraced += more.untraced + more.statements.len().saturating_sub(room);
        self.statements.extend(more.statements.into_iter().take(room));
    }
}

/// A statement's own failure, before it becomes the plugin's [`DbError`].
enum Failed {
    Db(tokio_postgres::Error),
    Convert(String),
    Oversized,
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Failed::Db(e)
    }
}

type Params<'a> = [&'a (dyn ToSql + Sync)];

impl Session {
    pub fn new(
        task: String,
        conn: Lent,
        deadline: Instant,
        policy: Arc<Policy>,
        role: Option<Arc<crate::access::Role>>,
        result_budget: usize,
        cancel_tls: crate::db::Tls,
    ) -> Self {
        Session { task, conn, deadline, policy, role, result_budget, cancel_tls, ending: Ending::default(), published: (0, 0), trace: None }
    }

    /// Keep every statement of this call ([`Session::take_trace`]).
    pub fn traced(mut self) -> Self {
        self.trace = Some(Trace::default());
        self
    }

    /// The statements kept so far, and how many more were sent.
    pub fn take_trace(&mut self) -> Trace {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// A statement about to be sent, as the trace will show it: when tracing and there is
    /// room (else only counted), before its parameters are handed over.
    fn note(&mut self, who: Who, sql: &str, params: &[Value]) -> Option<(Traced, Instant)> {
        let trace = self.trace.as_mut()?;
        if trace.statements.len() >= TRACE_KEPT {
            trace.untraced += 1;
            return None;
        }
        let mut shown: Vec<String> = params.iter().take(TRACE_PARAMS).map(value::show).collect();
        if params.len() > TRACE_PARAMS {
            shown.push(format!("… {} more", params.len() - TRACE_PARAMS));
        }
        let sql = crate::text::clip(sql.to_owned(), TRACE_SQL_BYTES);
        Some((Traced { who, sql, params: shown, outcome: String::new(), elapsed: Duration::ZERO }, Instant::now()))
    }

    /// A noted statement with what it did.
    fn record<T>(&mut self, noted: Option<(Traced, Instant)>, result: &wasmtime::Result<Result<T, DbError>>, shown: impl Fn(&T) -> String) {
        let (Some((mut traced, started)), Some(trace)) = (noted, self.trace.as_mut()) else { return };
        traced.outcome = match result {
            Ok(Ok(value)) => shown(value),
            Ok(Err(e)) => format!("error: {}{}", e.sqlstate.as_ref().map(|s| format!("{s} ")).unwrap_or_default(), e.message),
            Err(trap) => format!("trap: {trap}"),
        };
        traced.elapsed = started.elapsed();
        trace.statements.push(traced);
    }

    /// Count one more message of `bytes` against the call's outbox budget
    /// ([`MAX_PUBLISHES`] messages, [`MAX_PUBLISHED_BYTES`] in all): 300 messages of 1 MiB
    /// from one job once went through.
    pub fn spend_publish(&mut self, bytes: usize) -> Result<(), String> {
        let (count, total) = (self.published.0 + 1, self.published.1 + bytes);
        if count > MAX_PUBLISHES || total > MAX_PUBLISHED_BYTES {
            return Err(format!("refused: one call may publish at most {MAX_PUBLISHES} outbox messages and {} MiB in all", MAX_PUBLISHED_BYTES >> 20));
        }
        self.published = (count, total);
        Ok(())
    }

    /// How the call went so far.
    pub fn ending(&self) -> &Ending {
        &self.ending
    }

    /// A statement that returns rows.
    pub async fn query(&mut self, sql: String, params: Vec<Value>, who: Who) -> wasmtime::Result<Result<Rows, DbError>> {
        let budget = self.result_budget;
        let noted = self.note(who, &sql, &params);
        let result = self
            .run(sql, params, who, Rows { columns: Vec::new(), rows: Vec::new() }, move |conn, statement, params| {
                Box::pin(collect(conn, statement, params, budget))
            })
            .await;
        self.record(noted, &result, |rows| format!("{} row(s)", rows.rows.len()));
        result
    }

    /// A statement whose affected-row count is all that comes back.
    pub async fn execute(&mut self, sql: String, params: Vec<Value>, who: Who) -> wasmtime::Result<Result<u64, DbError>> {
        let noted = self.note(who, &sql, &params);
        let result =
            self.run(sql, params, who, 1, |conn, statement, params| Box::pin(async move { conn.execute(statement, params).await.map_err(Failed::Db) })).await;
        self.record(noted, &result, |n| format!("{n} row(s) affected"));
        result
    }

    /// Record `e` as the call's failure if it is the first, and hand it back.
    pub fn fail(&mut self, e: DbError) -> DbError {
        self.ending.failure.get_or_insert_with(|| e.clone());
        e
    }

    async fn run<T: Send>(
        &mut self,
        sql: String,
        params: Vec<Value>,
        who: Who,
        noop: T,
        send: impl for<'a> FnOnce(&'a Conn, &'a tokio_postgres::Statement, &'a Params<'a>) -> futures_util::future::BoxFuture<'a, Result<T, Failed>>,
    ) -> wasmtime::Result<Result<T, DbError>> {
        if let Some(first) = &self.ending.failure {
            return Ok(Err(DbError {
                sqlstate: first.sqlstate.clone(),
                message: format!("transaction is aborted by an earlier error: {}", first.message),
                retryable: first.retryable,
            }));
        }
        if who == Who::Plugin {
            let calls = self.role.as_ref().map(|r| r.calls.as_slice()).unwrap_or_default();
            if let Err(refusal) = self.policy.check(&self.task, &sql, calls).await {
                let message = crate::text::clip(refusal.to_string(), crate::text::MAX_ERROR);
                return Ok(Err(self.fail(DbError { sqlstate: refusal.sqlstate(), message, retryable: false })));
            }
        }
        let conn = match &self.conn {
            Lent::Conn(conn) => conn.clone(),
            Lent::Noop => return Ok(Ok(noop)),
            Lent::Nothing => {
                return Ok(Err(self.fail(DbError { sqlstate: None, message: "no transaction is open during describe()".into(), retryable: false })))
            }
        };
        let role = self.role.clone();
        let params: Vec<value::Param> = params.iter().map(value::Param).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let work = async {
            if conn.statement_cache.size() > STATEMENT_CACHE_LIMIT {
                conn.statement_cache.clear();
            }
            // Through a pooler, and when long, a statement is not kept: dropped at the end
            // of this block, so its Close goes out before the transaction can end.
            let statement = match conn.pooled() || sql.len() > CACHED_STATEMENT_BYTES {
                true => conn.prepare(&sql).await?,
                false => conn.prepare_cached(&sql).await?,
            };
            send(&conn, &statement, &refs).await
        };
        tokio::pin!(work);
        let outcome = match tokio::time::timeout_at(self.deadline.into(), &mut work).await {
            Ok(outcome) => outcome,
            Err(_) => {
                // Cancel on the server and wait for the statement to say so, so the
                // connection is in a known state for the host's ROLLBACK TO SAVEPOINT.
                self.ending.deadline_hit = true;
                self.cancel(&conn, work).await;
                return Err(wasmtime::format_err!("deadline exceeded while waiting for the database"));
            }
        };
        if who == Who::Plugin {
            self.ending.used = true;
        }
        match outcome {
            Ok(output) => Ok(Ok(output)),
            Err(Failed::Oversized) => {
                // The server is still sending rows: stop it rather than read them all.
                self.send_cancel(&conn).await;
                Ok(Err(self.fail(DbError {
                    sqlstate: Some("54000".into()),
                    message: format!(
                        "refused: the query's rows exceed {} MiB, the plugin's memory limit; read in pages (ORDER BY ... LIMIT) or aggregate in SQL",
                        self.result_budget >> 20
                    ),
                    retryable: false,
                })))
            }
            Err(Failed::Convert(message)) => Ok(Err(self.fail(DbError { sqlstate: None, message, retryable: false }))),
            Err(Failed::Db(e)) => {
                if e.is_closed() {
                    self.ending.broken = true;
                }
                let mut error = super::value::db_error(&e);
                if let (Some("42501"), Some(role)) = (error.sqlstate.as_deref(), &role) {
                    let hint = crate::db::refusal::plugin_hint(e.as_db_error().map_or("", |d| d.message()), &sql, &role.name);
                    error.message.push_str(&format!(" ({hint})"));
                }
                Ok(Err(self.fail(error)))
            }
        }
    }

    /// Ask the server to cancel what runs on `conn`; the connection is replaced after the
    /// call, as a late cancel could land on a later statement.
    async fn send_cancel(&mut self, conn: &Conn) {
        self.ending.cancel_sent = true;
        let _ = conn.cancel_token().cancel_query(self.cancel_tls.clone()).await;
    }

    /// Cancel what runs on `conn` and wait (at most [`CANCEL_GRACE`]) for `work` to end.
    ///
    /// The server drops a cancel that reaches the backend between statements, and a
    /// statement sent just before the deadline may reach the backend after its cancel
    /// did (the cancel travels on a connection of its own): then the statement runs on,
    /// so the cancel is sent again, at growing intervals, until the work ends. Sent
    /// once, such a statement held its lock wait until the grace ran out and the whole
    /// batch was lost with its connection.
    async fn cancel<F: std::future::Future>(&mut self, conn: &Conn, mut work: std::pin::Pin<&mut F>) {
        let give_up = Instant::now() + CANCEL_GRACE;
        let mut interval = CANCEL_RESEND;
        loop {
            self.send_cancel(conn).await;
            let until = (Instant::now() + interval).min(give_up);
            if tokio::time::timeout_at(until.into(), work.as_mut()).await.is_ok() {
                return;
            }
            if Instant::now() >= give_up {
                self.ending.broken = true;
                return;
            }
            interval *= 2;
        }
    }
}

/// Read a query's rows as they arrive, converting each, until the budget is spent.
async fn collect(conn: &Conn, statement: &tokio_postgres::Statement, params: &Params<'_>, budget: usize) -> Result<Rows, Failed> {
    let stream = conn.query_raw(statement, params.iter().copied()).await?;
    pin_mut!(stream);
    let columns: Vec<String> = statement.columns().iter().map(|c| c.name().to_owned()).collect();
    let mut spent = columns.iter().map(|c| c.len() + 24).sum::<usize>();
    let mut rows = Vec::new();
    while let Some(row) = stream.try_next().await? {
        let values = value::row_values(&row).map_err(Failed::Convert)?;
        spent += 24 + values.iter().map(value::size).sum::<usize>();
        if spent > budget {
            return Err(Failed::Oversized);
        }
        rows.push(values);
    }
    Ok(Rows { columns, rows })
}
