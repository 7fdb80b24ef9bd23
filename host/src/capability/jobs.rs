//! The WIT `jobs` interface: `enqueue` inserts one job of another task through the call's
//! own [`Session`](crate::capability::db::Session), so it is in the job's transaction
//! (rolled back with it), counts against the call's deadline and obeys the
//! aborted-transaction rule like a plugin's own statement. The right to enqueue into a
//! task is the database's to check (`almanac_job.enqueue`, V26): the plugin's role holds
//! it for the tasks its `describe()` names in `enqueues`, and no others.
use wasmtime::component::Resource;

use crate::bindings::almanac::plugin::jobs::{Host, NewJob};
use crate::bindings::almanac::plugin::types::{DbError, Value};
use crate::bindings::Transaction;
use crate::capability::db::{Session, Who};

const ENQUEUE: &str = include_str!("jobs.sql");

impl Host for Session {
    async fn enqueue(&mut self, _tx: Resource<Transaction>, job: NewJob) -> wasmtime::Result<Result<bool, DbError>> {
        let NewJob { task, slot, key, payload, run_after } = job;
        let text = |v: Option<String>| v.map_or(Value::Null, Value::Text);
        let at = |v: Option<i64>| v.map_or(Value::Null, Value::Timestamp);
        let params = vec![Value::Text(task), Value::Timestamp(slot), Value::Text(key), text(payload), at(run_after)];
        let created = self.query(ENQUEUE.to_owned(), params, Who::Host).await?;
        Ok(created.map(|rows| matches!(rows.rows.first().and_then(|row| row.first()), Some(Value::Boolean(true)))))
    }
}
