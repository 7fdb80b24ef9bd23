"""daily-points in Python: every day at 00:00 in its business zone (Asia/Shanghai unless
almanac.toml says otherwise), every account gets +10 points (setting `points`), once per
day. The same task as plugins/daily-points (same name, ledger and rules), so it replaces
it; the two never sit in one folder.

Eligibility: an account belongs to a day's slot if it exists in `accounts` when the slot
is planned. Once per day, even without the job row: points move only if the plugin's own
ledger row `points_ledger (task, period, account_id)` went in, keyed by the business day
(`job.period`), which a change of the schedule's hour or zone does not rename.
"""
import almanac_guest as almanac

LEDGER = """CREATE TABLE IF NOT EXISTS points_ledger (
    task       text        NOT NULL,
    period     text        NOT NULL,
    account_id bigint      NOT NULL,
    points     bigint      NOT NULL,
    slot       timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, period, account_id))"""


class DailyPoints(almanac.Task):
    def describe(self):
        return (
            almanac.TaskInfo("daily-points", "0 0 * * *", "Asia/Shanghai")
            .version("0.1.0-py")
            # A job reads nothing but its arguments, its settings and the database, so one
            # instance may run many in a row: the interpreter starts once per 1,000 jobs.
            .reuse(1000)
            .writes("accounts", "points_ledger")
            .setting("points", "10", "points each account gets per day")
            .setup(LEDGER)
        )

    def plan(self, slot, tx, after, limit):
        after = int(after) if after is not None else -(2**63)
        rows = tx.query("SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2", after, limit)
        return [str(row["id"]) for row in rows]

    def run(self, job, tx):
        try:
            account = int(job.key)
        except ValueError as e:
            raise almanac.Error.permanent(e)
        points = int(almanac.config.get("points"))
        inserted = tx.execute(
            "INSERT INTO points_ledger (task, period, account_id, points, slot) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            job.task, job.period, account, points, job.slot.start,
        )
        if inserted == 1:
            tx.execute("UPDATE accounts SET points = points + $2 WHERE id = $1", account, points)


Task = almanac.export(DailyPoints)
