-- A fresh workload: every account at 0 points, one pending job per account.
TRUNCATE points_ledger;
TRUNCATE almanac.jobs, almanac.job_counts;
UPDATE accounts SET points = 0;
INSERT INTO almanac.jobs (task, slot, key)
SELECT 'daily-points', '2026-03-07T16:00:00Z', id::text FROM accounts;
