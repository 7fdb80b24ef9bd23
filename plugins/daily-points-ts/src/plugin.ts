// daily-points in TypeScript: every day at 00:00 in its business zone (Asia/Shanghai unless
// almanac.toml says otherwise), every account gets +10 points (setting `points`), once per
// day. The same task as plugins/daily-points (same name, ledger and rules), so it replaces
// it; the two never sit in one folder.
//
// Eligibility: an account belongs to a day's slot if it exists in `accounts` when the slot
// is planned. Once per day, even without the job row: points move only if the plugin's own
// ledger row `points_ledger (task, period, account_id)` went in, keyed by the business day
// (`job.period`), which a change of the schedule's hour or zone does not rename.
import * as almanac from "almanac-guest";

const LEDGER = `CREATE TABLE IF NOT EXISTS points_ledger (
    task       text        NOT NULL,
    period     text        NOT NULL,
    account_id bigint      NOT NULL,
    points     bigint      NOT NULL,
    slot       timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, period, account_id))`;

export const task = almanac.exportTask({
  describe: () =>
    new almanac.TaskInfo("daily-points", "0 0 * * *", "Asia/Shanghai")
      .version("0.1.0-ts")
      // A job reads nothing but its arguments, its settings and the database, so one
      // instance may run many in a row: SpiderMonkey starts once per 1,000 jobs, not per job.
      .reuse(1000)
      .writes("accounts", "points_ledger")
      .setting("points", "10", "points each account gets per day")
      .setup(LEDGER),

  plan(slot, tx, after, limit) {
    const from = after === undefined ? -(2n ** 63n) : BigInt(after);
    return tx.query("SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2", from, limit).map((row) => String(row.id));
  },

  run(job, tx) {
    if (!/^-?\d+$/.test(job.key)) throw almanac.Error.permanent(`key ${JSON.stringify(job.key)} is not an account id`);
    const account = BigInt(job.key);
    const points = Number(almanac.config.get("points"));
    const inserted = tx.execute(
      "INSERT INTO points_ledger (task, period, account_id, points, slot) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
      job.task, job.period, account, points, job.slot.start,
    );
    if (inserted === 1) tx.execute("UPDATE accounts SET points = points + $2 WHERE id = $1", account, points);
  },
});
