//! `daily-points`: the seed's task. Every day at 00:00 in its business zone
//! (`Asia/Shanghai` unless `almanac.toml` says otherwise), every account gets +10
//! points (setting `points`), once per day.
//!
//! **Eligibility**: an account belongs to a day's slot if it exists in `accounts` when
//! the slot is planned. A slot planned late (after downtime) therefore includes accounts
//! created after the slot's midnight; a slot is never re-planned, so accounts created
//! after planning do not get that day.
//!
//! **Once per day, even without the job row**: the plugin writes its own ledger row
//! `points_ledger (task, period, account_id)` and adds points only when that insert
//! went in, so a job re-created after its job row was pruned cannot pay twice. It is
//! keyed by the business period (`job.period()`, the local day `2026-11-04`), not by
//! the slot's instant: moving the schedule from 00:00 to 06:00, or to another zone, keeps
//! naming the same day, so no day is paid twice across the change.
//!
//! `accounts (id bigint primary key, points bigint not null)` is the user's table; the
//! plugin only creates its ledger.
use almanac_guest::{config, export_task, Error, Job, Slot, Task, TaskInfo, Tx};

struct DailyPoints;

impl Task for DailyPoints {
    fn describe() -> TaskInfo {
        TaskInfo::new("daily-points", "0 0 * * *", "Asia/Shanghai")
            .writes(&["accounts", "points_ledger"])
            .version(env!("CARGO_PKG_VERSION"))
            .setting("points", "10", "points each account gets per day")
            .setup(&["CREATE TABLE IF NOT EXISTS points_ledger (
                    task       text        NOT NULL,
                    period     text        NOT NULL,
                    account_id bigint      NOT NULL,
                    points     bigint      NOT NULL,
                    slot       timestamptz NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (task, period, account_id))"])
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
        let points: i64 = config::parse("points")?;
        let inserted = tx.execute(
            "INSERT INTO points_ledger (task, period, account_id, points, slot)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[&job.task, &job.period(), &account, &points, &job.slot.start()],
        )?;
        if inserted == 1 {
            tx.execute("UPDATE accounts SET points = points + $2 WHERE id = $1", &[&account, &points])?;
        }
        Ok(())
    }
}

export_task!(DailyPoints);
