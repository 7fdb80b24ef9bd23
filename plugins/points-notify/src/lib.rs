//! `points-notify`: daily-points with a notification. Every day at 00:00 in its
//! business zone (`Asia/Shanghai` unless `almanac.toml` says otherwise), every account
//! gets +10 points once, and a `points-awarded` message says so.
//!
//! **Eligibility**: as daily-points: an account belongs to a day's slot if it exists in
//! `accounts` when the slot is planned.
//!
//! **Once per day**: the plugin's own ledger `notify_ledger (task, period, account_id)`
//! guards the points, as `points_ledger` does for daily-points.
//!
//! **The notification** is published in the same transaction as the points, on topic
//! `points-awarded`, keyed `<task>/<period>/<account>` by the business day (e.g.
//! `points-notify/2026-03-08/17`): a schedule moved to another hour or zone names the same
//! day, so the receiver dedupes across the change. The JSON payload is
//! `{"task":…,"period":…,"slot":…,"account":…,"points":10}`. A failed job leaves no
//! message; a retried or re-created job publishes the same key, which is a no-op. The
//! operator decides where the topic goes (`[outbox.topics.points-awarded]`); delivery
//! is at least once with `Idempotency-Key: points-awarded/<key>`.
use almanac_guest::{export_task, Error, Job, Slot, Task, TaskInfo, Tx};

struct PointsNotify;

const POINTS: i64 = 10;
const TOPIC: &str = "points-awarded";

impl Task for PointsNotify {
    fn describe() -> TaskInfo {
        TaskInfo::new("points-notify", "0 0 * * *", "Asia/Shanghai").writes(&["accounts", "notify_ledger"]).version(env!("CARGO_PKG_VERSION")).setup(&[
            "CREATE TABLE IF NOT EXISTS notify_ledger (
                    task       text        NOT NULL,
                    period     text        NOT NULL,
                    account_id bigint      NOT NULL,
                    points     bigint      NOT NULL,
                    slot       timestamptz NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (task, period, account_id))",
        ])
    }

    fn plan(_slot: &Slot, tx: &Tx, after: Option<&str>, limit: u32) -> Result<Vec<String>, Error> {
        let after = match after {
            Some(key) => key.parse::<i64>().map_err(Error::permanent)?,
            None => i64::MIN,
        };
        let rows = tx.query("SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2", &[&after, &i64::from(limit)])?;
        rows.iter().map(|row| Ok(row.get::<i64>(0)?.to_string())).collect()
    }

    fn run(job: &Job, tx: &Tx) -> Result<(), Error> {
        let account: i64 = job.key.parse().map_err(Error::permanent)?;
        let (period, slot) = (job.period(), job.slot.start());
        let inserted = tx.execute(
            "INSERT INTO notify_ledger (task, period, account_id, points, slot)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[&job.task, &period, &account, &POINTS, &slot],
        )?;
        if inserted == 1 {
            tx.execute("UPDATE accounts SET points = points + $2 WHERE id = $1", &[&account, &POINTS])?;
        }
        // Published whether or not the ledger row was new: if the points went in earlier
        // but the message was lost with a pruned job, this puts it back; otherwise the
        // same key is a no-op.
        let key = format!("{}/{period}/{account}", job.task);
        let payload =
            format!(r#"{{"task":{},"period":{},"slot":"{slot}","account":{account},"points":{POINTS}}}"#, json_string(&job.task), json_string(period),);
        tx.publish_json(TOPIC, &key, &payload)?;
        Ok(())
    }
}

/// A JSON string literal (the guest has no serde, and needs little of it).
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

export_task!(PointsNotify);
