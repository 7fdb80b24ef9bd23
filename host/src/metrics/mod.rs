//! Prometheus metrics (`almanac run --listen`, `/metrics`).
//!
//! Two kinds, and the difference matters when several hosts share a database:
//! - counters and the duration histogram count what *this process* did, once the
//!   transaction that did it was acknowledged (sum them across hosts);
//! - gauges (pending, oldest pending age, scheduler lag, outbox) are read from the
//!   database at scrape time, so every host reports the same values (take one, not the sum).
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry as Exposition;

use crate::db::Sql;

const GAUGES: &str = include_str!("gauges.sql");
const OUTBOX: &str = include_str!("outbox.sql");

/// The content type of what [`Metrics::render`] returns.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label value, escaped as the exposition format requires (`\\`, `\"`, `\n`):
/// prometheus-client writes values as given, and a plugin version holding a quote, a
/// newline and `# EOF` once forged a series and ended the scrape.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Text(String);

impl EncodeLabelValue for Text {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabel {
    task: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutboxLabel {
    topic: Text,
    state: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabel {
    topic: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabel {
    task: Text,
    version: Text,
    digest: Text,
}

pub use crate::job::JobEnd;

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric the host exports.
pub struct Metrics {
    exposition: Exposition,
    completed: Family<TaskLabel, Counter>,
    retried: Family<TaskLabel, Counter>,
    failed: Family<TaskLabel, Counter>,
    duration: Family<TaskLabel, Histogram, fn() -> Histogram>,
    load_failures: Counter,
    refused: Gauge,
    pending: Family<TaskLabel, Gauge>,
    oldest_pending: Family<TaskLabel, FloatGauge>,
    lag: Family<TaskLabel, FloatGauge>,
    held: Family<TaskLabel, Gauge>,
    empty: Family<TaskLabel, Gauge>,
    outbox: Family<OutboxLabel, Gauge>,
    topic_failures: Family<TopicLabel, Gauge>,
    topic_open: Family<TopicLabel, Gauge>,
    topic_paused: Family<TopicLabel, Gauge>,
    topic_oldest: Family<TopicLabel, FloatGauge>,
    plugins: Family<PluginLabel, Gauge>,
    concurrency: Family<TaskLabel, Gauge>,
    database_up: Gauge,
    /// Scrapes refill the gauge families (clear, then set); one at a time.
    scrape: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

fn duration_histogram() -> Histogram {
    // 0.5 ms to about 75 s: a no-op job to a job at a typical deadline.
    Histogram::new(exponential_buckets(0.0005, 2.5, 14))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut m = Metrics {
            exposition: Exposition::with_prefix("almanac"),
            completed: Family::default(),
            retried: Family::default(),
            failed: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            load_failures: Counter::default(),
            refused: Gauge::default(),
            pending: Family::default(),
            oldest_pending: Family::default(),
            lag: Family::default(),
            held: Family::default(),
            empty: Family::default(),
            outbox: Family::default(),
            topic_failures: Family::default(),
            topic_open: Family::default(),
            topic_paused: Family::default(),
            topic_oldest: Family::default(),
            plugins: Family::default(),
            concurrency: Family::default(),
            database_up: Gauge::default(),
            scrape: tokio::sync::Mutex::new(()),
        };
        let r = &mut m.exposition;
        r.register("jobs_completed", "Jobs this host completed (marked done)", m.completed.clone());
        r.register("jobs_retried", "Job attempts this host saw fail that will be retried", m.retried.clone());
        r.register("jobs_failed", "Jobs this host saw fail for good", m.failed.clone());
        r.register("job_duration_seconds", "Time in the plugin's run, per job attempt on this host", m.duration.clone());
        r.register("plugin_load_failures", "Plugin files this host refused to load (at start or on reload)", m.load_failures.clone());
        r.register(
            "plugins_refused",
            "Plugin files in this host's folder it refuses now (a deploy that did not take; almanac status says why)",
            m.refused.clone(),
        );
        r.register("jobs_pending", "Pending jobs (all hosts)", m.pending.clone());
        r.register("jobs_oldest_pending_age_seconds", "Age of the oldest pending job (all hosts)", m.oldest_pending.clone());
        r.register("scheduler_lag_seconds", "Now minus the start of the newest generated slot", m.lag.clone());
        r.register(
            "task_held",
            "1 while a task is held (almanac hold, or too many server crashes while its jobs ran): none of its jobs starts",
            m.held.clone(),
        );
        r.register(
            "task_empty_periods",
            "Periods within a task's backfill horizon whose plan returned no keys (no job was for them): an invoice run that billed nobody",
            m.empty.clone(),
        );
        r.register("outbox_messages", "Outbox messages pending or dead (all hosts)", m.outbox.clone());
        r.register("outbox_delivery_failures", "Failed deliveries of a topic ever, on any host (take increase() of it)", m.topic_failures.clone());
        r.register("outbox_circuit_open", "1 while a topic's circuit breaker is open (its receiver is failing), else 0", m.topic_open.clone());
        r.register("outbox_paused", "1 while an operator has paused a topic (almanac outbox pause), else 0", m.topic_paused.clone());
        r.register("outbox_oldest_pending_age_seconds", "Seconds since the oldest undelivered message of a topic was published", m.topic_oldest.clone());
        r.register("database_up", "1 if this scrape could read the database (the gauges above are from it), else 0", m.database_up.clone());
        r.register("plugin_loaded", "Plugins this host serves now (1 per task, labelled with version and digest)", m.plugins.clone());
        r.register(
            "task_concurrency",
            "Workers this host lets a task have since its jobs last conflicted (deadlocks, serialization failures): lowered on a conflict, raised back to its share as they stop; absent for a task never lowered",
            m.concurrency.clone(),
        );
        m
    }
}

impl Metrics {
    /// Count one job attempt whose transaction was acknowledged.
    pub fn record_job(&self, task: &str, end: JobEnd, elapsed: Duration) {
        let label = TaskLabel { task: Text(task.to_owned()) };
        let counter = match end {
            JobEnd::Done => &self.completed,
            JobEnd::Retried => &self.retried,
            JobEnd::Failed => &self.failed,
        };
        counter.get_or_create(&label).inc();
        self.duration.get_or_create(&label).observe(elapsed.as_secs_f64());
    }

    /// The workers a task may have on this host now ([`crate::executor::share`]).
    pub fn set_concurrency(&self, task: &str, limit: usize) {
        self.concurrency.get_or_create(&TaskLabel { task: Text(task.to_owned()) }).set(i64::try_from(limit).unwrap_or(i64::MAX));
    }

    pub fn record_load_failure(&self) {
        self.load_failures.inc();
    }

    /// How many of its folder's files this host refuses now.
    pub fn set_plugins_refused(&self, files: usize) {
        self.refused.set(i64::try_from(files).unwrap_or(i64::MAX));
    }

    /// The exposition: gauges read from the database now (none, and `database_up 0`, when
    /// it cannot be read), counters as they stand.
    pub async fn render(&self, client: Option<&tokio_postgres::Client>, served: &[Served], topics: &[String]) -> String {
        let read = match client {
            Some(client) => futures_util::future::try_join3(client.rows(GAUGES, &[]), client.rows(OUTBOX, &[]), crate::outbox::operate::topics(client))
                .await
                .inspect_err(|e| tracing::warn!("metrics: cannot read the database: {}", crate::db::error_chain(e)))
                .ok(),
            None => None,
        };
        let _one_scrape = self.scrape.lock().await;
        // Cleared and refilled, so a task or topic that is gone stops being reported.
        self.pending.clear();
        self.oldest_pending.clear();
        self.lag.clear();
        self.held.clear();
        self.empty.clear();
        self.outbox.clear();
        for family in [&self.topic_failures, &self.topic_open, &self.topic_paused] {
            family.clear();
        }
        self.topic_oldest.clear();
        self.plugins.clear();
        self.database_up.set(i64::from(read.is_some()));
        if let Some((tasks, outbox, topics_health)) = read {
            for t in &topics_health {
                let label = TopicLabel { topic: Text(t.topic.clone()) };
                self.topic_failures.get_or_create(&label).set(t.failures_total);
                self.topic_open.get_or_create(&label).set(i64::from(t.opened_at.is_some()));
                self.topic_paused.get_or_create(&label).set(i64::from(t.paused));
                self.topic_oldest.get_or_create(&label).set(t.oldest_pending_seconds.unwrap_or(0.0));
            }
            for row in &tasks {
                let label = TaskLabel { task: Text(row.get(0)) };
                self.pending.get_or_create(&label).set(row.get(1));
                self.oldest_pending.get_or_create(&label).set(row.get(2));
                if let Some(lag) = row.get::<_, Option<f64>>(3) {
                    self.lag.get_or_create(&label).set(lag);
                }
                self.held.get_or_create(&label).set(i64::from(row.get::<_, bool>(4)));
                self.empty.get_or_create(&label).set(row.get(5));
            }
            // A configured topic is reported at 0 when nothing waits in it, as Prometheus
            // users expect of a series that exists.
            for topic in topics {
                for state in ["pending", "dead"] {
                    self.outbox.get_or_create(&OutboxLabel { topic: Text(topic.clone()), state: Text(state.into()) }).set(0);
                }
            }
            for row in &outbox {
                let label = OutboxLabel { topic: Text(row.get(0)), state: Text(row.get(1)) };
                self.outbox.get_or_create(&label).set(row.get(2));
            }
        }
        for plugin in served {
            // Counters of every served task exist from the start, at 0, so rates and
            // alerts see the first job too.
            let task = TaskLabel { task: Text(plugin.task.clone()) };
            for counter in [&self.completed, &self.retried, &self.failed] {
                drop(counter.get_or_create(&task));
            }
            let label = PluginLabel { task: Text(plugin.task.clone()), version: Text(plugin.version.clone()), digest: Text(plugin.digest.clone()) };
            self.plugins.get_or_create(&label).set(1);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.exposition).expect("writing to a String cannot fail");
        text
    }
}

/// A plugin this host serves, as the metrics name it.
#[derive(Debug, Clone)]
pub struct Served {
    pub task: String,
    pub version: String,
    pub digest: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn label_values_are_escaped() {
        let metrics = Metrics::default();
        let forged = "1\"} 1\nalmanac_jobs_completed_total{task=\"x\"} 9\n# EOF\n";
        metrics.record_job("t\"\\\n", JobEnd::Done, Duration::from_millis(1));
        let served = [Served { task: "t".into(), version: forged.into(), digest: "d".into() }];
        let text = metrics.render(None, &served, &["topic\n# EOF".into()]).await;
        // One line ends the exposition, the last; no value starts a line of its own.
        assert_eq!(text.lines().filter(|l| l.starts_with("# EOF")).count(), 1, "{text}");
        assert_eq!(text.lines().last(), Some("# EOF"), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("almanac_jobs_completed_total{task=\"x\"}")), "{text}");
        assert!(text.contains(r#"version="1\"} 1\nalmanac_jobs_completed_total{task=\"x\"} 9\n# EOF\n""#), "{text}");
        assert!(text.contains(r#"task="t\"\\\n""#), "{text}");
    }
}
