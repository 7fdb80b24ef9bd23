//! `almanac status`: per task, the cursor, the job counts and the outbox counts.
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::db::Sql;

const STATUS: &str = include_str!("status.sql");

#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskStatus {
    pub task: String,
    pub cron: Option<String>,
    pub zone: Option<String>,
    pub catch_up: Option<String>,
    pub cursor: Option<DateTime<Utc>>,
    pub next_slot: Option<DateTime<Utc>>,
    pub paused: bool,
    /// `almanac hold`, or too many server crashes: none of its jobs starts on any host.
    pub held: bool,
    /// Why: the operator's reason, or the crashes that held it.
    pub held_reason: Option<String>,
    pub pending: i64,
    /// Pending jobs a worker holds locked right now.
    pub running: i64,
    pub done: i64,
    pub failed: i64,
    /// Jobs an operator discarded (`almanac discard`): kept, never run.
    pub discarded: i64,
    /// Periods generated under a calendar since changed by `apply` (done once, by period).
    pub older_calendar: i64,
    /// Periods within the backfill horizon whose plan returned no keys, and the newest.
    pub empty_periods: i64,
    pub latest_empty: Option<String>,
    /// Every period should have jobs: an empty one fails `status`.
    pub expect_jobs: bool,
    /// Holiday calendars whose dated holidays end within the task's horizon.
    pub calendar_ending: Option<String>,
    pub oldest_pending_seconds: Option<f64>,
    pub last_error: Option<String>,
    /// Outbox messages the task's jobs published that wait for delivery.
    pub outbox_pending: i64,
    /// Outbox messages the task's jobs published that will not be delivered without
    /// `almanac outbox retry`.
    pub outbox_dead: i64,
    pub outbox_delivered: i64,
}

pub async fn report(client: &tokio_postgres::Client) -> Result<Vec<TaskStatus>, tokio_postgres::Error> {
    let rows = client.rows(STATUS, &[]).await?;
    let running = crate::executor::operate::running(client).await?;
    let outbox = crate::outbox::operate::counts(client).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let cron: Option<String> = r.get(1);
            let zone: Option<String> = r.get(2);
            // An on-demand task (no cron) has no cursor worth showing.
            let cursor: Option<DateTime<Utc>> = r.get::<_, Option<DateTime<Utc>>>(4).filter(|_| cron.is_some());
            let schedule = match (&cron, &zone) {
                (Some(c), Some(z)) => crate::scheduler::operate::stored_schedule(Some(c), z, r.get(15)).ok().flatten(),
                _ => None,
            };
            let next_slot = schedule.as_ref().zip(cursor).and_then(|(s, at)| s.next_after(at)).map(|s| s.start);
            let horizon = std::time::Duration::from_secs_f64(r.get::<_, Option<f64>>(19).unwrap_or(0.0).max(0.0));
            let calendar_ending = schedule.as_ref().and_then(|s| s.business()).and_then(|b| b.expiring(crate::scheduler::applied::calendar_horizon(horizon)));
            let task: String = r.get(0);
            let messages = outbox.get(&Some(task.clone())).copied().unwrap_or_default();
            TaskStatus {
                running: running.get(&task).copied().unwrap_or(0),
                task,
                cron,
                zone,
                catch_up: r.get(3),
                cursor,
                next_slot,
                paused: r.get::<_, Option<bool>>(5).unwrap_or(false),
                held: r.get::<_, Option<bool>>(13).unwrap_or(false),
                held_reason: r.get(14),
                pending: r.get(6),
                done: r.get(7),
                failed: r.get(8),
                oldest_pending_seconds: r.get(9),
                last_error: r.get(10),
                discarded: r.get(11),
                older_calendar: r.get(12),
                empty_periods: r.get(16),
                latest_empty: r.get(17),
                expect_jobs: r.get(18),
                calendar_ending,
                outbox_pending: messages.pending,
                outbox_dead: messages.dead,
                outbox_delivered: messages.delivered,
            }
        })
        .collect())
}

impl TaskStatus {
    /// Held by the claims sweep for server crashes (`executor/sweep_claims.sql` writes
    /// the reason), not by an operator: an incident, which fails `status`.
    pub fn held_for_crashes(&self) -> bool {
        self.held && self.held_reason.as_deref().is_some_and(|r| r.starts_with("held automatically:"))
    }

    /// A task that expects jobs in every period had one without any: a missed invoice
    /// run, which fails `status`.
    pub fn missed_periods(&self) -> bool {
        self.expect_jobs && self.empty_periods > 0
    }
}

/// The table `almanac status` prints: columns as wide as their widest cell, so a long
/// task name or a `(held)` mark keeps them in line; what is not an error (discarded
/// jobs, periods under an older calendar) goes on a line of its own, not under LAST ERROR.
pub fn render(statuses: &[TaskStatus]) -> String {
    let names: Vec<String> = statuses
        .iter()
        .map(|s| match (s.held, s.paused) {
            (true, _) => format!("{} (held)", s.task),
            (false, true) => format!("{} (paused)", s.task),
            (false, false) => s.task.clone(),
        })
        .collect();
    let w = names.iter().map(|n| n.chars().count()).chain([4]).max().unwrap_or(4);
    let mut out = format!(
        "{:<w$} {:<20} {:<20} {:>8} {:>8} {:>8} {:>8} {:>8}  {}\n",
        "TASK", "CURSOR (UTC)", "NEXT SLOT (UTC)", "PENDING", "RUNNING", "DONE", "FAILED", "OLDEST", "LAST ERROR"
    );
    let at = |t: Option<DateTime<Utc>>| t.map_or_else(|| "-".to_owned(), |t| t.format("%Y-%m-%d %H:%M:%S").to_string());
    for (s, task) in statuses.iter().zip(&names) {
        let oldest = s.oldest_pending_seconds.map_or_else(|| "-".to_owned(), |secs| format!("{secs:.0}s"));
        // The useful part of an error is often its end (a panic message after the trap):
        // a long one goes whole on the line below its task.
        let error = crate::text::printable(s.last_error.as_deref().unwrap_or_default()).into_owned();
        let (column, below) = if error.chars().count() > 60 { ("(below)".to_owned(), Some(error)) } else { (error, None) };
        // An on-demand task has a cursor in its row, which nothing reads.
        let cursor = if s.cron.is_some() { at(s.cursor) } else { "(on demand)".to_owned() };
        out.push_str(&format!(
            "{:<w$} {:<20} {:<20} {:>8} {:>8} {:>8} {:>8} {:>8}  {}\n",
            task,
            cursor,
            at(s.next_slot),
            s.pending,
            s.running,
            s.done,
            s.failed,
            oldest,
            column
        ));
        if s.discarded > 0 {
            out.push_str(&format!("    discarded: {} job(s), kept as evidence (never run)\n", s.discarded));
        }
        if s.older_calendar > 0 {
            out.push_str(&format!("    calendar changed: {} period(s) were generated under an older calendar\n", s.older_calendar));
        }
        if let Some(error) = below {
            out.push_str(&format!("    last error: {error}\n"));
        }
        if let (true, Some(why)) = (s.held, &s.held_reason) {
            out.push_str(&format!("    held: {}\n", crate::text::printable(why)));
        }
        if let Some(ending) = &s.calendar_ending {
            out.push_str(&format!("    calendar: {ending}\n"));
        }
        if s.empty_periods > 0 {
            let expected = if s.expect_jobs { "the task expects jobs in every period" } else { "expect_jobs is off" };
            out.push_str(&format!(
                "    empty: {} period(s) whose plan returned no keys, the latest {} ({expected}; `almanac backfill` plans a period again)\n",
                s.empty_periods,
                crate::text::printable(s.latest_empty.as_deref().unwrap_or("-"))
            ));
        }
    }
    let sum = |f: fn(&TaskStatus) -> i64| statuses.iter().map(f).sum::<i64>();
    let (pending, dead, delivered) = (sum(|s| s.outbox_pending), sum(|s| s.outbox_dead), sum(|s| s.outbox_delivered));
    if pending + dead + delivered > 0 {
        out.push_str(&format!("outbox: {pending} pending, {dead} dead, {delivered} delivered\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_stay_in_line_and_notes_are_not_errors() {
        let at = "2026-12-01T00:00:00Z".parse().ok();
        let statuses = [
            TaskStatus {
                task: "a-rather-long-task-name".into(),
                cron: Some("0 0 * * *".into()),
                cursor: at,
                held: true,
                discarded: 2,
                ..TaskStatus::default()
            },
            TaskStatus { task: "dunning".into(), cursor: at, older_calendar: 3, last_error: Some("boom".into()), ..TaskStatus::default() },
        ];
        let out = render(&statuses);
        let lines: Vec<&str> = out.lines().collect();
        let column = |line: &str| line.find("CURSOR").or_else(|| line.find("2026-12-01")).or_else(|| line.find("(on demand)")).unwrap();
        assert_eq!(column(lines[0]), column(lines[1]), "{out}");
        assert!(lines[1].starts_with("a-rather-long-task-name (held) "), "{out}");
        assert_eq!(lines[2], "    discarded: 2 job(s), kept as evidence (never run)");
        assert_eq!(column(lines[3]), column(lines[1]), "{out}");
        assert!(lines[3].contains("(on demand)") && lines[3].ends_with("  boom"), "the last error is the error alone:\n{out}");
        assert_eq!(lines[4], "    calendar changed: 3 period(s) were generated under an older calendar");
    }
}
