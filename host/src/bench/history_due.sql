-- One throughput run's jobs: every account for slot $1 (an instant of today, one per
-- run, each its own period: daily-points keys its ledger by period), with every account
-- back at 0 points.
WITH reset AS (UPDATE accounts SET points = 0 WHERE points <> 0)
INSERT INTO almanac.jobs (task, slot, key, period)
SELECT 'daily-points', $1, id::text, 'run ' || to_char($1::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') FROM accounts
