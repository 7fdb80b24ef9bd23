//! Publishing outbox messages (the only way a plugin's job reaches the world outside the
//! database, [`Tx::publish`]), and enqueueing jobs of other tasks ([`Tx::enqueue`]), both
//! inside the job's transaction.
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

/// One job of another task, for [`Tx::enqueue`]: `(task, slot, key)` is its identity.
pub struct NewJob<'a> {
    task: &'a str,
    slot: crate::Timestamp,
    key: &'a str,
    payload: Option<&'a str>,
    run_after: Option<crate::Timestamp>,
}

impl<'a> NewJob<'a> {
    /// A job of `task` keyed `key`, for the business period `slot` falls in. Derive `slot`
    /// from the current job (`job.slot.start()`), never from a clock: a retried job then
    /// names the same job, and enqueues nothing twice.
    pub fn new(task: &'a str, slot: crate::Timestamp, key: &'a str) -> Self {
        NewJob { task, slot, key, payload: None, run_after: None }
    }

    /// JSON text handed to the job as its payload (at most 1 MiB).
    pub fn payload(mut self, json: &'a str) -> Self {
        self.payload = Some(json);
        self
    }

    /// Not before this instant (by default, from its slot).
    pub fn run_after(mut self, at: crate::Timestamp) -> Self {
        self.run_after = Some(at);
        self
    }
}

impl Tx<'_> {
    /// Enqueue one job of another task inside this transaction: it exists once the job
    /// commits, and never if the job fails. Returns false when a job of that identity
    /// exists already. The task must be one [`TaskInfo::enqueues`](crate::TaskInfo::enqueues)
    /// names; a refused or failed enqueue fails the attempt like a failed statement.
    pub fn enqueue(&self, job: &NewJob<'_>) -> Result<bool, Error> {
        let job = crate::bindings::almanac::plugin::jobs::NewJob {
            task: job.task.to_owned(),
            slot: job.slot.0,
            key: job.key.to_owned(),
            payload: job.payload.map(str::to_owned),
            run_after: job.run_after.map(|t| t.0),
        };
        Ok(crate::bindings::almanac::plugin::jobs::enqueue(self.0, &job)?)
    }
}
