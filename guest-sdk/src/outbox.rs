//! Publishing outbox messages: the only way a plugin's job reaches the world outside
//! the database. See [`Tx::publish`].
use crate::task::Error;
use crate::tx::Tx;

/// What [`Tx::publish`] did: [`Published`](PublishOutcome::Published), or
/// [`AlreadyPublished`](PublishOutcome::AlreadyPublished) when a message with the same
/// topic and key exists (nothing was written; the first payload stands).
pub use crate::bindings::almanac::plugin::outbox::PublishOutcome;

impl Tx<'_> {
    /// Write one message into the outbox, inside this transaction: it is delivered
    /// after the job commits, and never if the job fails or rolls back.
    ///
    /// `(topic, key)` is the message's identity. Derive `key` from the job's identity
    /// (e.g. `format!("{}/{}/{}", job.task, job.slot.start(), account)`) so a retried or
    /// re-created job publishes the same key and the second publish is a no-op.
    ///
    /// Delivery is at least once, to the sink the operator configured for `topic` (a
    /// webhook gets the payload as the POST body, with `Content-Type: <content_type>`
    /// and `Idempotency-Key: <topic>/<key>`); receivers must dedupe by that key.
    ///
    /// A topic is 1 to 200 bytes of lowercase letters, digits, `-`, `_` and `.`; a key 1
    /// to 1000 bytes; a payload at most 1 MiB. A refused or failed publish aborts the
    /// transaction like a failed statement: the attempt fails even if the error is
    /// ignored.
    pub fn publish(&self, topic: &str, key: &str, payload: impl AsRef<[u8]>, content_type: &str) -> Result<PublishOutcome, Error> {
        Ok(crate::bindings::almanac::plugin::outbox::publish(self.0, topic, key, payload.as_ref(), content_type)?)
    }

    /// [`Tx::publish`] with `Content-Type: application/json`; `json` must already be
    /// JSON text (the host does not parse it).
    pub fn publish_json(&self, topic: &str, key: &str, json: &str) -> Result<PublishOutcome, Error> {
        self.publish(topic, key, json, "application/json")
    }
}
