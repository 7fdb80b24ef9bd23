-- A fresh workload: every account at 0 points, one pending job per account.
TRUNCATE points_ledger;
-- The claims too: a claim left by an earlier run's host names jobs this reset makes
-- again under the same keys, and the sweep would take it for a crash under them.
TRUNCATE almanac.jobs, almanac.job_counts, almanac.slot_counts, almanac.task_minutes, almanac.claims;
UPDATE accounts SET points = 0;
-- Yesterday's slot (16:00 UTC is daily-points' midnight), so the jobs sit in the current
-- month's partition as a day's jobs do.
INSERT INTO almanac.jobs (task, slot, key, period)
SELECT 'daily-points', date_trunc('day', now(), 'UTC') - interval '8 hours', id::text, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM accounts;
