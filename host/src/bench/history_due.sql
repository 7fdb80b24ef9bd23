-- One throughput run's jobs: every account for slot $1 (an instant of today, one per
-- run), with every account back at 0 points.
WITH reset AS (UPDATE accounts SET points = 0 WHERE points <> 0)
INSERT INTO almanac.jobs (task, slot, key) SELECT 'daily-points', $1, id::text FROM accounts
