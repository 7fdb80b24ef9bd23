//! The `[outbox.topics.<topic>]` tables of `almanac.toml`: which sink delivers a topic.
//!
//! ```toml
//! [outbox.topics.points-awarded]
//! sink = "webhook"                          # webhook | log
//! url = "https://hooks.example.com/points"  # webhook only; http or https
//! timeout = "5s"                            # webhook only: per request; default 10s
//! ca_file = "/etc/almanac/private-ca.pem"   # webhook only: a private CA to trust as well
//! retry_for = "3d"                          # a message failing this long after it was
//!                                           # published is dead; default 3 days
//! max_attempts = 100                        # also dead after this many attempts; default: no cap
//! breaker_after = 5                         # consecutive failures that open the circuit
//! breaker_cooldown = "30s"                  # then one probe per cooldown until one succeeds
//! reply_task = "record-invoice"            # each delivery's outcome becomes a job of this
//!                                           # task, keyed by the message's key
//! reply_headers = ["location"]              # response headers the reply job gets
//! publishers = ["points-notify"]            # tasks that may publish on it; default: the
//!                                           # first task that does
//!
//! [outbox.topics.audit]
//! sink = "log"                              # logs the message and counts it delivered
//! ```
//!
//! Parsing is [`crate::config`]'s (unknown keys are errors there); this module checks
//! the values and reports each mistake with the span it is at, so the error names the
//! file and line.
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// Per-request timeout of a webhook when the topic does not set one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a failing message is retried when the topic does not say: days, as payment
/// webhooks do, so an outage of a receiver over a weekend loses nothing.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(3 * 24 * 3600);
/// Consecutive failed deliveries of a topic that open its circuit.
pub const DEFAULT_BREAKER_AFTER: u32 = 5;
/// How long an open circuit waits before one message probes the receiver.
pub const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(30);

/// `[outbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    #[serde(default)]
    topics: BTreeMap<Spanned<String>, TopicFile>,
}

impl Section {
    /// Every task a topic names (its reply task and its publishers), with the topic and
    /// the field that names it, for the check that each is a task.
    pub fn named_tasks(&self) -> impl Iterator<Item = (&str, &'static str, &Spanned<String>)> {
        self.topics.iter().flat_map(|(topic, t)| {
            let reply = t.reply_task.iter().map(|task| (topic.get_ref().as_str(), "reply_task", task));
            let publishers = t.publishers.iter().flatten().map(|task| (topic.get_ref().as_str(), "publishers", task));
            reply.chain(publishers)
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicFile {
    sink: Spanned<String>,
    url: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    ca_file: Option<Spanned<String>>,
    max_attempts: Option<Spanned<u32>>,
    retry_for: Option<Spanned<String>>,
    breaker_after: Option<Spanned<u32>>,
    breaker_cooldown: Option<Spanned<String>>,
    reply_task: Option<Spanned<String>>,
    reply_headers: Option<Vec<Spanned<String>>>,
    publishers: Option<Vec<Spanned<String>>>,
}

/// Where a topic's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkSpec {
    /// HTTP POST to `url`, each request bounded by `timeout`; an https receiver is
    /// checked against the Mozilla and OS roots and `ca_file`'s certificates.
    Webhook { url: String, timeout: Duration, ca_file: Option<PathBuf> },
    /// The host's log.
    Log,
}

/// One configured topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub sink: SinkSpec,
    /// A message still failing this long after it was published is dead.
    pub retry_for: Duration,
    /// Attempts before a message is dead, besides `retry_for` (at least 1; None: no cap).
    pub max_attempts: Option<u32>,
    /// When deliveries stop and a probe tests the receiver.
    pub breaker: Breaker,
    /// The task each delivery's outcome goes to, as a job.
    pub reply: Option<Reply>,
    /// The tasks that may publish on it; empty: the first task that does.
    pub publishers: Vec<String>,
}

/// A topic's reply task: each delivered message's outcome (the receiver's status, the
/// `headers` named here, the body's first 64 KiB) becomes a job of `task`, keyed by the
/// message's key, made in the transaction that marks the message delivered. So "call the
/// receiver, then record what it answered" is two steps, each exactly once in effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub task: String,
    /// Lowercase header names.
    pub headers: Vec<String>,
}

/// A topic's circuit breaker: after `after` consecutive failed deliveries (on any host)
/// the topic's messages wait, and once per `cooldown` one of them probes the receiver;
/// the first success closes the circuit and the waiting messages go at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    pub after: u32,
    pub cooldown: Duration,
}

impl Breaker {
    /// `after` as the database counts failures (an `integer`): a value past its range,
    /// written to mean "never", stays "never" instead of wrapping to a negative count that
    /// would keep the circuit open for good.
    pub fn threshold(&self) -> i32 {
        i32::try_from(self.after).unwrap_or(i32::MAX)
    }
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker { after: DEFAULT_BREAKER_AFTER, cooldown: DEFAULT_BREAKER_COOLDOWN }
    }
}

/// The configured topics, by name. A topic not in here has no sink: its messages stay
/// pending (and the dispatcher says so once).
pub type Topics = BTreeMap<String, TopicSpec>;

/// Check the section; an error is the span it is at and what is wrong.
pub fn topics(section: &Section) -> Result<Topics, (Range<usize>, String)> {
    let mut topics = Topics::new();
    for (name, t) in &section.topics {
        let topic = name.get_ref();
        if !super::message::valid_topic(topic) {
            return Err((
                name.span(),
                format!("outbox topic {topic:?}: a topic is 1 to {} bytes of lowercase letters, digits, '-', '_' and '.'", super::message::MAX_TOPIC),
            ));
        }
        let max_attempts = match &t.max_attempts {
            Some(n) if *n.get_ref() == 0 => return Err((n.span(), format!("outbox topic {topic:?}: max_attempts must be at least 1"))),
            Some(n) => Some(*n.get_ref()),
            None => None,
        };
        let duration = |d: &Option<Spanned<String>>, name: &str, default: Duration| match d {
            Some(d) => match humantime::parse_duration(d.get_ref()) {
                Ok(v) if !v.is_zero() => Ok(v),
                Ok(_) => Err((d.span(), format!("outbox topic {topic:?}: {name} must be more than zero"))),
                Err(e) => Err((d.span(), format!("outbox topic {topic:?}: {name} {:?}: {e}", d.get_ref()))),
            },
            None => Ok(default),
        };
        let retry_for = duration(&t.retry_for, "retry_for", DEFAULT_RETRY_FOR)?;
        let cooldown = duration(&t.breaker_cooldown, "breaker_cooldown", DEFAULT_BREAKER_COOLDOWN)?;
        let after = match &t.breaker_after {
            Some(n) if *n.get_ref() == 0 => return Err((n.span(), format!("outbox topic {topic:?}: breaker_after must be at least 1"))),
            Some(n) => *n.get_ref(),
            None => DEFAULT_BREAKER_AFTER,
        };
        let sink = match t.sink.get_ref().as_str() {
            "webhook" => {
                let Some(url) = &t.url else {
                    return Err((t.sink.span(), format!("outbox topic {topic:?}: sink = \"webhook\" needs a url")));
                };
                check_url(url.get_ref()).map_err(|e| (url.span(), format!("outbox topic {topic:?}: url {:?}: {e}", url.get_ref())))?;
                let timeout = match &t.timeout {
                    Some(d) => match humantime::parse_duration(d.get_ref()) {
                        Ok(d) if !d.is_zero() => d,
                        Ok(_) => return Err((d.span(), format!("outbox topic {topic:?}: timeout must be more than zero"))),
                        Err(e) => return Err((d.span(), format!("outbox topic {topic:?}: timeout {:?}: {e}", d.get_ref()))),
                    },
                    None => DEFAULT_TIMEOUT,
                };
                // A CA file that cannot be read stops the start, naming the line.
                let ca_file = match &t.ca_file {
                    Some(file) => {
                        let path = PathBuf::from(file.get_ref());
                        crate::tls::roots_from(&path, "CA file").map_err(|e| (file.span(), format!("outbox topic {topic:?}: ca_file: {e}")))?;
                        Some(path)
                    }
                    None => None,
                };
                SinkSpec::Webhook { url: url.get_ref().clone(), timeout, ca_file }
            }
            "log" => {
                if let Some(extra) = [&t.url, &t.timeout, &t.ca_file].into_iter().flatten().map(Spanned::span).next() {
                    return Err((extra, format!("outbox topic {topic:?}: url, timeout and ca_file are settings of sink = \"webhook\", not of sink = \"log\"")));
                }
                SinkSpec::Log
            }
            other => return Err((t.sink.span(), format!("outbox topic {topic:?}: unknown sink {other:?} (expected webhook or log)"))),
        };
        let reply = match (&t.reply_task, &t.reply_headers) {
            (Some(task), headers) if !task.get_ref().is_empty() => {
                let mut names = Vec::new();
                for h in headers.iter().flatten() {
                    let name = h.get_ref().to_ascii_lowercase();
                    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        return Err((h.span(), format!("outbox topic {topic:?}: reply_headers: {:?} is not a header name", h.get_ref())));
                    }
                    names.push(name);
                }
                Some(Reply { task: task.get_ref().clone(), headers: names })
            }
            (Some(task), _) => return Err((task.span(), format!("outbox topic {topic:?}: reply_task is a task's name"))),
            (None, Some(h)) if !h.is_empty() => return Err((h[0].span(), format!("outbox topic {topic:?}: reply_headers needs a reply_task"))),
            (None, _) => None,
        };
        let mut publishers = Vec::new();
        for task in t.publishers.iter().flatten() {
            if task.get_ref().is_empty() {
                return Err((task.span(), format!("outbox topic {topic:?}: a publisher is a task's name")));
            }
            publishers.push(task.get_ref().clone());
        }
        if t.publishers.as_ref().is_some_and(Vec::is_empty) {
            return Err((name.span(), format!("outbox topic {topic:?}: publishers is empty; name the tasks that publish on it, or leave it out")));
        }
        if let (Some(task), true) = (&t.reply_task, publishers.is_empty()) {
            // A reply makes a job of the reply task keyed by the message's key: whoever
            // publishes first would otherwise choose another task's jobs.
            return Err((
                task.span(),
                format!(
                    "outbox topic {topic:?}: a topic with a reply_task must name its publishers = [...]: each message it carries makes a job of {:?}",
                    task.get_ref()
                ),
            ));
        }
        topics.insert(topic.clone(), TopicSpec { sink, retry_for, max_attempts, breaker: Breaker { after, cooldown }, reply, publishers });
    }
    Ok(topics)
}

/// An absolute `http://` or `https://` URL.
fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
    match parsed.scheme() {
        "http" | "https" if parsed.host_str().is_some() => Ok(()),
        "http" | "https" => Err("no host".into()),
        other => Err(format!("unsupported scheme {other:?}; expected http or https")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through `almanac.toml`'s own parser, so errors carry the file and line.
    fn parse(text: &str) -> Result<Topics, String> {
        let file = crate::config::Config::parse("almanac.toml", text.to_owned()).map_err(|e| e.to_string())?;
        file.outbox().map_err(|e| e.to_string())
    }

    #[test]
    fn topics_are_checked_with_their_line() {
        let ok = parse("[outbox.topics.points-awarded]\nsink = \"webhook\"\nurl = \"http://127.0.0.1:8080/hook\"\ntimeout = \"5s\"\n\n[outbox.topics.audit]\nsink = \"log\"\nmax_attempts = 3\n").unwrap();
        assert_eq!(
            ok["points-awarded"],
            TopicSpec {
                sink: SinkSpec::Webhook { url: "http://127.0.0.1:8080/hook".into(), timeout: Duration::from_secs(5), ca_file: None },
                retry_for: DEFAULT_RETRY_FOR,
                max_attempts: None,
                breaker: Breaker::default(),
                reply: None,
                publishers: vec![]
            }
        );
        assert_eq!(
            ok["audit"],
            TopicSpec {
                sink: SinkSpec::Log,
                retry_for: DEFAULT_RETRY_FOR,
                max_attempts: Some(3),
                breaker: Breaker::default(),
                reply: None,
                publishers: vec![]
            }
        );
        let tuned = parse("[outbox.topics.t]\nsink = \"log\"\nretry_for = \"12h\"\nbreaker_after = 2\nbreaker_cooldown = \"1s\"\n").unwrap();
        assert_eq!((tuned["t"].retry_for, tuned["t"].breaker), (Duration::from_secs(12 * 3600), Breaker { after: 2, cooldown: Duration::from_secs(1) }));
        let e = parse("[outbox.topics.t]\nsink = \"log\"\nretry_for = \"soon\"\n").unwrap_err();
        assert!(e.starts_with("almanac.toml:3: ") && e.contains("retry_for"), "{e}");
        let never = parse("[outbox.topics.t]\nsink = \"log\"\nbreaker_after = 4294967295\n").unwrap();
        assert_eq!(never["t"].breaker.threshold(), i32::MAX);
        let e = parse("[outbox.topics.t]\nsink = \"log\"\nbreaker_after = 0\n").unwrap_err();
        assert!(e.starts_with("almanac.toml:3: ") && e.contains("breaker_after"), "{e}");
        let bound = parse("[outbox.topics.t]\nsink = \"log\"\npublishers = [\"points-notify\"]\n").unwrap();
        assert_eq!(bound["t"].publishers, ["points-notify"]);
        let e = parse("[outbox.topics.t]\nsink = \"log\"\npublishers = []\n").unwrap_err();
        assert!(e.contains("publishers is empty"), "{e}");
        let e = parse("[outbox.topics.t]\nsink = \"log\"\nreply_task = \"record\"\n").unwrap_err();
        assert!(e.starts_with("almanac.toml:3: ") && e.contains("must name its publishers"), "{e}");

        let e = parse("[outbox.topics.t]\nsink = \"kafka\"\n").unwrap_err();
        assert_eq!(e, "almanac.toml:2: outbox topic \"t\": unknown sink \"kafka\" (expected webhook or log)");
        let e = parse("[tasks]\n\n[outbox.topics.t]\nsink = \"webhook\"\nurl = \"ftp://example.invalid/\"\n").unwrap_err();
        assert!(e.starts_with("almanac.toml:5: ") && e.contains("expected http or https"), "{e}");
        let e = parse("[outbox.topics.t]\nsink = \"webhook\"\nurl = \"https://example.invalid/\"\nca_file = \"/nonexistent/ca.pem\"\n").unwrap_err();
        assert!(e.starts_with("almanac.toml:4: ") && e.contains("/nonexistent/ca.pem"), "{e}");
        let e = parse("[outbox.topics.t]\nsink = \"webhook\"\n").unwrap_err();
        assert!(e.contains("needs a url"), "{e}");
        let e = parse("[outbox.topics.t]\nsink = \"log\"\nmax_attempts = 0\n").unwrap_err();
        assert!(e.starts_with("almanac.toml:3: ") && e.contains("at least 1"), "{e}");
        let e = parse("[outbox.topics.T]\nsink = \"log\"\n").unwrap_err();
        assert!(e.starts_with("almanac.toml:1: "), "{e}");
        let e = parse("[outbox.topics.t]\nsink = \"log\"\ncolour = 1\n").unwrap_err();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }
}
