//! The console's job lists (filtered, paged by the last row seen, never by an offset)
//! and a job's page with every recorded attempt.
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use crate::db::Sql;

const PAGE: &str = include_str!("jobs_page.sql");
const ONE: &str = include_str!("job_one.sql");

/// Rows per page at most.
pub const MOST: i64 = 200;

/// Which jobs a list shows.
#[derive(Debug, Default, Deserialize)]
pub struct Filter {
    pub task: String,
    pub status: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub key: Option<String>,
    pub prefix: Option<String>,
    /// The last row of the previous page.
    pub after_slot: Option<DateTime<Utc>>,
    pub after_key: Option<String>,
    pub limit: Option<i64>,
}

pub use crate::executor::operate::JobRow;

pub async fn page(client: &Client, f: &Filter) -> Result<Vec<JobRow>, tokio_postgres::Error> {
    let empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let (status, key, prefix) = (empty(&f.status), empty(&f.key), empty(&f.prefix));
    let limit = f.limit.unwrap_or(50).clamp(1, MOST);
    let after_key = f.after_key.clone().unwrap_or_default();
    let rows = client.rows(PAGE, &[&f.task, &status, &f.from, &f.to, &key, &prefix, &f.after_slot, &after_key, &limit]).await?;
    Ok(rows.iter().map(JobRow::from_row).collect())
}

/// A job and its attempts.
#[derive(Debug, Serialize)]
pub struct JobPage {
    #[serde(flatten)]
    pub job: JobRow,
    pub payload: Option<String>,
    pub plugin_digest: Option<String>,
    pub created_at: DateTime<Utc>,
    pub crashes: i32,
    pub transients: i32,
    pub attempts_recorded: Vec<crate::executor::operate::AttemptRow>,
}

pub async fn one(client: &Client, task: &str, slot: DateTime<Utc>, key: &str) -> Result<Option<JobPage>, tokio_postgres::Error> {
    let Some(r) = client.opt(ONE, &[&task, &slot, &key]).await? else { return Ok(None) };
    let attempts = crate::executor::operate::attempts(client, task, key, Some(slot), 1000).await?;
    Ok(Some(JobPage {
        job: JobRow::from_row(&r),
        payload: r.get(10),
        plugin_digest: r.get(11),
        created_at: r.get(12),
        crashes: r.get(13),
        transients: r.get(14),
        attempts_recorded: attempts,
    }))
}
