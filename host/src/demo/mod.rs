//! The demo's scenario in the database (`almanac demo`): its accounts, a clean slate,
//! progress, each day's result, a duplicate trigger and the final check.
use chrono::{DateTime, Utc};
use tokio_postgres::Client;

const SEED_ACCOUNTS: &str = include_str!("seed_accounts.sql");
const FILL_ACCOUNTS: &str = include_str!("fill_accounts.sql");
const RESET: &str = include_str!("reset.sql");
const PROGRESS: &str = include_str!("progress.sql");
const DAYS: &str = include_str!("days.sql");
const RETRIGGER: &str = include_str!("retrigger.sql");
const VERDICT: &str = include_str!("verdict.sql");

/// `accounts` accounts at 0 points, in a new `accounts` table.
pub async fn seed_accounts(client: &Client, accounts: i64) -> Result<(), tokio_postgres::Error> {
    client.batch_execute(SEED_ACCOUNTS).await?;
    client.execute(FILL_ACCOUNTS, &[&accounts]).await?;
    Ok(())
}

/// Forget an earlier run's jobs, slots and ledger.
pub async fn reset(client: &Client) -> Result<(), tokio_postgres::Error> {
    client.batch_execute(RESET).await
}

/// Jobs of `task` done, jobs not done, and its cursor.
pub async fn progress(client: &Client, task: &str) -> Result<(i64, i64, DateTime<Utc>), tokio_postgres::Error> {
    let row = client.query_one(PROGRESS, &[&task]).await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// One period's result.
pub struct Day {
    pub slot: DateTime<Utc>,
    pub jobs: i64,
    pub ledger: i64,
    pub points: i64,
    /// The business period, e.g. "2026-12-01".
    pub period: String,
}

/// Each generated slot of `task`, with its ledger rows and points.
pub async fn days(client: &Client, task: &str) -> Result<Vec<Day>, tokio_postgres::Error> {
    let rows = client.query(DAYS, &[&task]).await?;
    Ok(rows.iter().map(|r| Day { slot: r.get(0), jobs: r.get(1), ledger: r.get(2), points: r.get(3), period: r.get(4) }).collect())
}

/// Enqueue every account's job of `task` for the period of instant `at` again; the
/// number of new jobs.
pub async fn retrigger(client: &Client, task: &str, at: DateTime<Utc>) -> Result<u64, tokio_postgres::Error> {
    client.execute(RETRIGGER, &[&task, &at]).await
}

/// Accounts whose points are not `want`, and the ledger's rows.
pub async fn verdict(client: &Client, want: i64) -> Result<(i64, i64), tokio_postgres::Error> {
    let row = client.query_one(VERDICT, &[&want]).await?;
    Ok((row.get(0), row.get(1)))
}
