//! The WIT `outbox` interface: `publish` writes one message into `almanac.outbox`
//! through the call's own [`Session`](crate::capability::db::Session), so the row is in
//! the job's transaction, counts against the call's deadline and obeys the
//! aborted-transaction rule exactly like a plugin's own `execute`.
use wasmtime::component::Resource;

use crate::bindings::almanac::plugin::outbox::{Host, PublishOutcome};
use crate::bindings::almanac::plugin::types::{DbError, Value};
use crate::bindings::Transaction;
use crate::capability::db::{Session, Who};

const PUBLISH: &str = include_str!("outbox/publish.sql");

/// Longest topic, in bytes.
pub const MAX_TOPIC: usize = 200;
/// Longest key, in bytes.
pub const MAX_KEY: usize = 1000;
/// Largest payload, in bytes.
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Longest content type, in bytes.
pub const MAX_CONTENT_TYPE: usize = 200;

/// Why a publish was refused before it reached the database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("refused: outbox topic {0:?} must be 1 to {MAX_TOPIC} bytes of lowercase letters, digits, '-', '_' and '.'")]
    Topic(String),
    #[error("refused: outbox key must be 1 to {MAX_KEY} bytes (got {0})")]
    Key(usize),
    #[error("refused: outbox payload is {0} bytes; the limit is {MAX_PAYLOAD}")]
    Payload(usize),
    #[error("refused: outbox content type {0:?} must be 1 to {MAX_CONTENT_TYPE} printable ASCII characters")]
    ContentType(String),
}

/// Whether `topic` is a valid topic name (also what `almanac.toml` accepts).
pub fn valid_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= MAX_TOPIC
        && topic.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
}

/// Check a message before it is written; the content type ends up in an HTTP header,
/// so it must be one.
pub fn check(topic: &str, key: &str, payload: &[u8], content_type: &str) -> Result<(), Refusal> {
    if !valid_topic(topic) {
        return Err(Refusal::Topic(topic.to_owned()));
    }
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(Refusal::Key(key.len()));
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(Refusal::Payload(payload.len()));
    }
    if content_type.is_empty() || content_type.len() > MAX_CONTENT_TYPE || !content_type.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(Refusal::ContentType(content_type.to_owned()));
    }
    Ok(())
}

impl Host for Session {
    async fn publish(
        &mut self,
        _tx: Resource<Transaction>,
        topic: String,
        key: String,
        payload: Vec<u8>,
        content_type: String,
    ) -> wasmtime::Result<Result<PublishOutcome, DbError>> {
        if let Err(refusal) = check(&topic, &key, &payload, &content_type) {
            // A refused publish fails the attempt like a refused statement: a plugin that
            // swallowed it would otherwise commit its effect without the message.
            let e = DbError { sqlstate: None, message: refusal.to_string(), retryable: false };
            return Ok(Err(self.fail(e)));
        }
        let task = if self.task.is_empty() { Value::Null } else { Value::Text(self.task.clone()) };
        let params = vec![Value::Text(topic), Value::Text(key), Value::Bytes(payload), Value::Text(content_type), task];
        // The db interface's own path: same connection, deadline, cancel-on-deadline and
        // first-error bookkeeping as the plugin's statements, but sent as the host (the
        // plugin's role has no privilege on `almanac.outbox`, by design).
        let inserted = self.execute(PUBLISH.to_owned(), params, Who::Host).await?;
        Ok(inserted.map(|n| if n == 0 { PublishOutcome::AlreadyPublished } else { PublishOutcome::Published }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_checked_before_they_are_written() {
        assert_eq!(check("points-awarded", "k", b"{}", "application/json"), Ok(()));
        assert_eq!(check("a.b_c-1", "k", b"", "text/plain; charset=utf-8"), Ok(()));
        assert!(matches!(check("", "k", b"", "text/plain"), Err(Refusal::Topic(_))));
        assert!(matches!(check("Points", "k", b"", "text/plain"), Err(Refusal::Topic(_))));
        assert!(matches!(check("t", "", b"", "text/plain"), Err(Refusal::Key(0))));
        assert!(matches!(check("t", "k", &vec![0; MAX_PAYLOAD + 1], "text/plain"), Err(Refusal::Payload(_))));
        assert!(matches!(check("t", "k", b"", "text/plain\r\nX-Evil: 1"), Err(Refusal::ContentType(_))));
        assert!(matches!(check("t", "k", b"", ""), Err(Refusal::ContentType(_))));
    }
}
