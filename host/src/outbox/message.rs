//! An outbox message's rules: what a topic, a key, a payload and a content type may be
//! (checked when a plugin publishes, and for topics when `almanac.toml` names them), and
//! the insert that writes one.

/// Writes one message (a no-op if its topic and key exist).
pub const PUBLISH: &str = include_str!("publish.sql");

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
    !topic.is_empty() && topic.len() <= MAX_TOPIC && topic.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
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
