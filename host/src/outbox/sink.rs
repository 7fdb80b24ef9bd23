//! Where messages go. A sink is a small trait so that others (NATS, Kafka, SMTP) can
//! follow the webhook and the log; the dispatcher only needs "delivered", "try again
//! later" or "never".

use futures_util::future::BoxFuture;

/// A sink that cannot be built from its topic's configuration.
#[derive(Debug, thiserror::Error)]
#[error("outbox sink: {0}")]
pub struct BuildError(pub String);

/// Why a delivery did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    /// Whether a later attempt may succeed; a permanent failure makes the message dead
    /// at once.
    pub retryable: bool,
    /// What went wrong, stored as the message's `last_error`.
    pub message: String,
    /// The receiver's status code, for sinks that have one (HTTP).
    pub status: Option<u16>,
}

impl SinkError {
    pub fn retryable(message: impl Into<String>) -> SinkError {
        SinkError { retryable: true, message: message.into(), status: None }
    }
}

/// One claimed message, as a sink gets it.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: i64,
    pub topic: String,
    pub key: String,
    pub payload: Vec<u8>,
    pub content_type: String,
    /// 1 on the first delivery attempt.
    pub attempt: u32,
    /// The task whose job published it (none: written some other way).
    pub task: Option<String>,
    /// When it was published: the slot of its reply job, if its topic has a reply task.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// What the receiver answered when it took a message: for the topic's reply task.
#[derive(Debug, Clone, Default)]
pub struct Delivered {
    /// The receiver's status code (0 for sinks without one).
    pub status: u16,
    /// Its response headers, names in lowercase.
    pub headers: Vec<(String, String)>,
    /// The start of its response body, at most [`REPLY_BODY`] bytes.
    pub body: Vec<u8>,
    /// Whether the body went on past [`REPLY_BODY`].
    pub truncated: bool,
}

/// Bytes of a response body kept for the reply task.
pub const REPLY_BODY: usize = 64 * 1024;

impl Message {
    /// `<topic>/<key>`: the same on every delivery of this message, so a receiver can
    /// tell a redelivery from a new message.
    pub fn idempotency_key(&self) -> String {
        format!("{}/{}", self.topic, self.key)
    }
}

/// Something that can deliver a message.
///
/// `deliver` returns once the receiver has taken the message (`Ok`) or refused it. It
/// must bound its own time: the dispatcher holds the message's row lock, and its
/// transaction open, while it waits.
pub trait Sink: Send + Sync {
    fn deliver<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<Delivered, SinkError>>;
}

/// Logs each message at info level and counts it delivered: for the demo, and for
/// topics whose only consumer is whoever reads the log.
pub struct LogSink;

/// Bytes of a payload a log line shows.
const LOG_PAYLOAD: usize = 1000;

impl Sink for LogSink {
    fn deliver<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<Delivered, SinkError>> {
        Box::pin(async move {
            let shown = &message.payload[..message.payload.len().min(LOG_PAYLOAD)];
            tracing::info!(
                target: "outbox",
                topic = %message.topic,
                key = %message.key,
                content_type = %message.content_type,
                bytes = message.payload.len(),
                attempt = message.attempt,
                "outbox message: {}",
                String::from_utf8_lossy(shown)
            );
            Ok(Delivered::default())
        })
    }
}
