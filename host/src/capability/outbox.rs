//! The WIT `outbox` interface: `publish` writes one message into `almanac.outbox`
//! through the call's own [`Session`](crate::capability::db::Session), so the row is in
//! the job's transaction, counts against the call's deadline and obeys the
//! aborted-transaction rule exactly like a plugin's own `execute`.
use wasmtime::component::Resource;

use crate::bindings::almanac::plugin::outbox::{Host, PublishOutcome};
use crate::bindings::almanac::plugin::types::{DbError, Value};
use crate::bindings::Transaction;
use crate::capability::db::{Session, Who};
use crate::outbox::message::{check, PUBLISH};

impl Host for Session {
    async fn publish(
        &mut self,
        _tx: Resource<Transaction>,
        topic: String,
        key: String,
        payload: Vec<u8>,
        content_type: String,
    ) -> wasmtime::Result<Result<PublishOutcome, DbError>> {
        if let Err(refusal) = check(&topic, &key, &payload, &content_type).map_err(|r| r.to_string()).and_then(|()| self.spend_publish(payload.len())) {
            // A refused publish fails the attempt like a refused statement: a plugin that
            // swallowed it would otherwise commit its effect without the message.
            let e = DbError { sqlstate: None, message: refusal, retryable: false };
            return Ok(Err(self.fail(e)));
        }
        let params = vec![Value::Text(topic), Value::Text(key), Value::Bytes(payload), Value::Text(content_type)];
        // The db interface's own path: same session, deadline, cancel-on-deadline and
        // first-error bookkeeping as the plugin's statements, through the one function
        // of the host's that writes `almanac.outbox` for the session's own task (the
        // plugin's role has no privilege on the table itself, by design).
        let inserted = self.query(PUBLISH.to_owned(), params, Who::Host).await?;
        Ok(inserted.map(|rows| match rows.rows.first().and_then(|row| row.first()) {
            Some(Value::Int(0)) => PublishOutcome::AlreadyPublished,
            _ => PublishOutcome::Published,
        }))
    }
}
