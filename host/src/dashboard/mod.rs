//! The console (`/` on `almanac run --listen`): a page that fetches [`overview`] as JSON
//! every few seconds and draws it, with the actions the signed-in operator may take
//! beside what they act on (`http::actions`). Three files, no build step, no CDN; its
//! script is a file of its own, so the Content-Security-Policy allows no inline script.
//!
//! Cost: the per-task counts are `almanac status`'s query, which reads every job row; the
//! rest reads indexes. It runs only while somebody has the page open.
use axum::http::header;
use axum::response::{Html, IntoResponse};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Client;

use crate::db::Sql;

pub mod calendar;
pub mod charts;
pub mod jobs;
use crate::plugin::Registry;
use crate::status::TaskStatus;

const FAILURES: &str = include_str!("failures.sql");
const TOPICS: &str = include_str!("topics.sql");

/// Failed attempts shown, newest first.
const FAILURES_SHOWN: i64 = 20;
/// Dead outbox messages shown, newest first.
const DEAD_SHOWN: i64 = 10;
/// Refused deploys shown, current ones first (of how many there are).
const REFUSED_SHOWN: i64 = 50;

/// The sign-in page (`http::signin` puts its message in).
pub const LOGIN: &str = include_str!("login.html");

pub async fn page() -> Html<&'static str> {
    Html(include_str!("page.html"))
}

pub async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("app.js"))
}

pub async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("app.css"))
}

/// Everything the page shows.
#[derive(Debug, Serialize)]
pub struct Overview {
    pub generated_at: DateTime<Utc>,
    pub tasks: Vec<Task>,
    pub failures: Vec<Failure>,
    pub topics: Vec<Topic>,
    pub dead_messages: Vec<crate::outbox::operate::MessageRow>,
    pub plugins: Vec<LoadedPlugin>,
    /// Every host on record, live ones first.
    pub hosts: Vec<crate::hosts::HostRow>,
    /// Plugin files a host refused (on any host), with why and what serves instead.
    pub refused_deploys: Vec<crate::catalog::refused::RefusedDeploy>,
    /// How many there are in all, shown or not.
    pub refused_deploys_total: i64,
    /// Jobs whose slots lie outside the history's month partitions (the default partition).
    pub outside_partitions: i64,
}

/// A task's schedule and counts, with the schedule's instants also in its own zone.
#[derive(Debug, Serialize)]
pub struct Task {
    #[serde(flatten)]
    pub status: TaskStatus,
    pub cursor_local: Option<String>,
    pub next_slot_local: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Failure {
    pub task: String,
    pub slot: DateTime<Utc>,
    pub key: String,
    /// The latest failed attempt's number, and how many attempts of the job failed.
    pub attempt: i32,
    pub failures: i64,
    pub error: String,
    pub failed_at: DateTime<Utc>,
    /// Where the job stands now: `failed` (for good), `pending` (will retry) or `done`.
    pub job_status: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Topic {
    pub topic: String,
    pub pending: i64,
    pub dead: i64,
    pub delivered: i64,
    /// Paused by an operator (`almanac outbox pause`).
    pub paused: bool,
    /// Its circuit breaker is open: the receiver fails, deliveries wait.
    pub circuit_open: bool,
    /// The last delivery error while deliveries fail.
    pub last_error: Option<String>,
}

/// A plugin this host serves now, with what it declared and the settings it runs with
/// (a secret, read from the host's environment, as its digest only).
#[derive(Debug, Serialize)]
pub struct LoadedPlugin {
    pub task: String,
    pub version: String,
    pub digest: String,
    pub file: String,
    /// Tables it reads, and `write` if it also writes them.
    pub tables: Vec<DeclaredTable>,
    /// Functions it declares it calls; tasks it enqueues into.
    pub calls: Vec<String>,
    pub enqueues: Vec<String>,
    pub settings: std::collections::BTreeMap<String, String>,
    pub max_attempts: u32,
    pub timeout_seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct DeclaredTable {
    pub name: String,
    pub write: bool,
}

impl LoadedPlugin {
    fn of(p: &crate::plugin::Plugin) -> LoadedPlugin {
        let spec = &p.spec;
        LoadedPlugin {
            task: p.name().to_owned(),
            version: spec.version.clone(),
            digest: p.digest.clone(),
            file: p.path.display().to_string(),
            tables: spec.tables.iter().map(|t| DeclaredTable { name: t.name.clone(), write: t.write }).collect(),
            calls: spec.calls.clone(),
            enqueues: spec.enqueues.clone(),
            settings: p.settings().shown(p.name()),
            max_attempts: spec.max_attempts,
            timeout_seconds: spec.timeout.as_secs_f64(),
        }
    }
}

pub async fn overview(client: &Client, registry: &Registry) -> Result<Overview, tokio_postgres::Error> {
    let ((statuses, failures, topics, dead_messages, outside_partitions), (refused_deploys, refused_deploys_total), hosts) = futures_util::future::try_join3(
        futures_util::future::try_join5(
            crate::status::report(client),
            client.rows(FAILURES, &[&FAILURES_SHOWN]),
            client.rows(TOPICS, &[]),
            crate::outbox::operate::list(client, Some("dead"), None, None, DEAD_SHOWN),
            crate::history::outside(client),
        ),
        crate::catalog::refused::list(client, Some(REFUSED_SHOWN)),
        crate::hosts::list(client),
    )
    .await?;
    Ok(Overview {
        generated_at: Utc::now(),
        tasks: statuses.into_iter().map(Task::from).collect(),
        failures: failures
            .iter()
            .map(|r| Failure {
                task: r.get(0),
                slot: r.get(1),
                key: r.get(2),
                attempt: r.get(3),
                error: r.get(4),
                failed_at: r.get(5),
                job_status: r.get(6),
                failures: r.get(7),
            })
            .collect(),
        topics: topics
            .iter()
            .map(|r| Topic {
                topic: r.get("topic"),
                pending: r.get("pending"),
                dead: r.get("dead"),
                delivered: r.get("delivered"),
                paused: r.get("paused"),
                circuit_open: r.get("open"),
                last_error: r.get("last_error"),
            })
            .collect(),
        dead_messages,
        plugins: registry.iter().map(|p| LoadedPlugin::of(p)).collect(),
        hosts,
        refused_deploys,
        refused_deploys_total,
        outside_partitions,
    })
}

impl From<TaskStatus> for Task {
    fn from(status: TaskStatus) -> Task {
        let zone: Option<chrono_tz::Tz> = status.zone.as_deref().and_then(|z| z.parse().ok());
        let local = |t: Option<DateTime<Utc>>| Some(t?.with_timezone(&zone?).format("%Y-%m-%d %H:%M:%S %Z (UTC%:z)").to_string());
        Task { cursor_local: local(status.cursor), next_slot_local: local(status.next_slot), status }
    }
}
