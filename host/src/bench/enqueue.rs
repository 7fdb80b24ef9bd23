//! How fast applications can hand work over: `almanac.enqueue_many` of many keys in one
//! call, and single `almanac.enqueue` calls each in its own transaction from several
//! connections, each next to a plain INSERT of the same rows into `almanac.jobs` in the
//! same run (the baseline: what the checks, the calendar and SECURITY DEFINER cost).
use std::time::Instant;

use chrono::{DateTime, Utc};
use futures_util::future::try_join_all;
use serde::Serialize;

const PLAIN_MANY: &str = include_str!("plain_enqueue_many.sql");
const PLAIN_ONE: &str = include_str!("plain_enqueue.sql");

#[derive(Debug, Clone, Serialize)]
pub struct EnqueueReport {
    pub many_keys: usize,
    pub many_jobs_per_second: f64,
    pub many_plain_jobs_per_second: f64,
    pub single_calls: usize,
    pub single_connections: usize,
    pub single_jobs_per_second: f64,
    pub single_plain_jobs_per_second: f64,
}

/// Measure on `url`, where `task` is registered and `slot` is on its calendar.
pub async fn measure(url: &str, task: &str, slot: DateTime<Utc>, many: usize, single: usize, connections: usize) -> anyhow::Result<EnqueueReport> {
    let mut clients = Vec::new();
    for _ in 0..connections {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        clients.push(client);
    }
    let admin = &clients[0];
    // The plain baseline names the job's period itself, as the API works it out.
    let period: String =
        admin.query_one("SELECT almanac.period_label(period, zone, $2) FROM ONLY almanac.schedules WHERE task = $1", &[&task, &slot]).await?.get(0);
    let period = &period;
    let keys = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();
    let mut rates = Vec::new();
    // Alternate the order so neither side always runs on a warmer table.
    for (name, sql) in [("api", "SELECT almanac.enqueue_many($1, $2, $3)"), ("plain", PLAIN_MANY)] {
        let keys = keys(&format!("many-{name}"), many);
        let started = Instant::now();
        match name {
            "api" => admin.execute(sql, &[&task, &slot, &keys]).await?,
            _ => admin.execute(sql, &[&task, &slot, &keys, period]).await?,
        };
        rates.push(many as f64 / started.elapsed().as_secs_f64());
    }
    let (many_api, many_plain) = (rates[0], rates[1]);
    let mut rates = Vec::new();
    for (name, sql) in [("plain", PLAIN_ONE), ("api", "SELECT almanac.enqueue($1, $2, $3)")] {
        let per = single / connections;
        let started = Instant::now();
        try_join_all(clients.iter().enumerate().map(|(c, client)| {
            let keys = keys(&format!("one-{name}-{c}"), per);
            async move {
                let statement = client.prepare(sql).await?;
                for key in &keys {
                    match name {
                        "api" => client.execute(&statement, &[&task, &slot, key]).await?,
                        _ => client.execute(&statement, &[&task, &slot, key, period]).await?,
                    };
                }
                Ok::<_, tokio_postgres::Error>(())
            }
        }))
        .await?;
        rates.push((per * connections) as f64 / started.elapsed().as_secs_f64());
    }
    let (single_plain, single_api) = (rates[0], rates[1]);
    let made: i64 = admin.query_one("SELECT count(*) FROM almanac.jobs WHERE key LIKE 'many-%' OR key LIKE 'one-%'", &[]).await?.get(0);
    anyhow::ensure!(made as usize == 2 * many + 2 * (single / connections) * connections, "enqueue bench: {made} jobs made");
    admin.execute("DELETE FROM almanac.jobs WHERE key LIKE 'many-%' OR key LIKE 'one-%'", &[]).await?;
    Ok(EnqueueReport {
        many_keys: many,
        many_jobs_per_second: many_api,
        many_plain_jobs_per_second: many_plain,
        single_calls: single / connections * connections,
        single_connections: connections,
        single_jobs_per_second: single_api,
        single_plain_jobs_per_second: single_plain,
    })
}
