//! `almanac status`: per task, where it stands, each outbox topic in trouble and each
//! refused deploy; exit 1 when a job failed, a message died, a topic's circuit is open, a
//! message has waited too long or a host refuses a plugin file now.
use std::process::ExitCode;
use std::time::Duration;

use almanac::outbox::operate::{self, TopicHealth};
use almanac::status;

use super::database::Database;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// One JSON object per line: one per task, then one per refused deploy (those have
    /// `"refused_deploy": true`), then one per host on record (`"host": true`).
    #[arg(long)]
    json: bool,
    /// Fail (exit 1) when an outbox message has waited this long since it was published.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    outbox_max_age: Duration,
}

/// Whether a topic's oldest undelivered message has waited past `max_age`.
fn too_old(t: &TopicHealth, max_age: Duration) -> bool {
    t.oldest_pending_seconds.is_some_and(|age| age >= max_age.as_secs_f64())
}

/// Whether a topic fails `status`: its circuit is open or a message waited too long (a
/// paused topic is shown, and fails only by age).
fn failing(t: &TopicHealth, max_age: Duration) -> bool {
    t.opened_at.is_some() || too_old(t, max_age)
}

/// What is wrong with a topic, if anything.
fn trouble(t: &TopicHealth, max_age: Duration) -> Option<String> {
    let waiting = match t.oldest_pending_seconds {
        Some(age) => format!("{} pending, the oldest for {}", t.pending, humantime::format_duration(Duration::from_secs(age as u64))),
        None => "nothing pending".into(),
    };
    let error = t.last_error.as_deref().map(|e| format!("; last error: {e}")).unwrap_or_default();
    let paused = t.paused.then(|| format!("PAUSED ({})", t.paused_reason.as_deref().unwrap_or("no reason given")));
    let open = t.opened_at.map(|since| format!("circuit OPEN since {} UTC ({} failures in a row{error})", since.format("%Y-%m-%d %H:%M:%S"), t.failures));
    // Both, when both: resuming a paused topic whose circuit is open delivers nothing yet.
    let states: Vec<String> = [paused, open].into_iter().flatten().collect();
    if !states.is_empty() {
        return Some(format!("{}; {waiting}", states.join("; ")));
    }
    too_old(t, max_age).then(|| format!("{waiting} (over --outbox-max-age){error}"))
}

pub async fn run(database: &Database, args: StatusArgs) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    let statuses = status::report(&client).await?;
    let topics = operate::topics(&client).await?;
    let (refused, _) = almanac::catalog::refused::list(&client, None).await?;
    let hosts = almanac::hosts::list(&client).await?;
    let troubled: Vec<(&TopicHealth, String)> = topics.iter().filter_map(|t| trouble(t, args.outbox_max_age).map(|why| (t, why))).collect();
    if args.json {
        for s in &statuses {
            println!("{}", serde_json::to_string(s)?);
        }
        for deploy in &refused {
            let mut line = serde_json::to_value(deploy)?;
            line["refused_deploy"] = true.into();
            println!("{line}");
        }
        for host in &hosts {
            let mut line = serde_json::to_value(host)?;
            line["host"] = true.into();
            println!("{line}");
        }
    } else {
        print!("{}", status::render(&statuses));
        let outside = almanac::history::outside(&client).await?;
        if outside > 0 {
            println!(
                "history: {outside} job(s) with slots outside the month partitions (more than 5 years back or 2 years ahead) wait in almanac.jobs_default"
            );
        }
        for (topic, why) in &troubled {
            println!("outbox topic {}: {why}", topic.topic);
        }
        for deploy in &refused {
            println!("refused deploy: {}", almanac::catalog::refused::describe(deploy));
        }
        print!("{}", almanac::hosts::render(&hosts));
    }
    let refusing = refused.iter().any(|d| !d.stale);
    if refusing
        || topics.iter().any(|t| failing(t, args.outbox_max_age))
        || statuses.iter().any(|s| s.failed > 0 || s.outbox_dead > 0 || s.held_for_crashes() || s.missed_periods())
    {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_topic_whose_circuit_is_open_shows_both() {
        let topic = TopicHealth {
            topic: "invoices".into(),
            paused: true,
            paused_reason: Some("receiver migration".into()),
            opened_at: "2026-12-01T10:00:00Z".parse().ok(),
            failures: 5,
            failures_total: 9,
            last_error: Some("HTTP 503".into()),
            pending: 2,
            oldest_pending_seconds: Some(120.0),
        };
        let why = trouble(&topic, Duration::from_secs(3600)).unwrap();
        assert_eq!(
            why,
            "PAUSED (receiver migration); circuit OPEN since 2026-12-01 10:00:00 UTC (5 failures in a row; last error: HTTP 503); 2 pending, the oldest for 2m"
        );
    }
}
