-- The history: $1 done daily-points jobs, spread evenly over the 365 daily slots before
-- today (16:00 UTC, the task's midnight in Asia/Shanghai), as a year of runs leaves them.
INSERT INTO almanac.jobs (task, slot, key, status, attempts, run_after, created_at, completed_at, plugin_digest, period)
SELECT 'daily-points', s.slot, 'h' || k, 'done', 1, s.slot, s.slot, s.slot + interval '1 minute', 'bench',
       to_char(s.slot AT TIME ZONE 'Asia/Shanghai', 'YYYY-MM-DD')
FROM (SELECT date_trunc('day', now(), 'UTC') - make_interval(days => d) + interval '16 hours' AS slot
      FROM generate_series(1, 365) d) s,
     generate_series(1, ($1::bigint + 364) / 365) k
