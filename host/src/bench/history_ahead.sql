-- Pending jobs that are not due yet ($1 of them, for tomorrow's slot): they sit in the
-- pending index as a backlog does, and a claim must not walk over them.
INSERT INTO almanac.jobs (task, slot, key, run_after, period)
SELECT 'daily-points', date_trunc('day', now(), 'UTC') + interval '1 day 16 hours', 'p' || k,
       date_trunc('day', now(), 'UTC') + interval '1 day 16 hours', to_char(now() AT TIME ZONE 'UTC' + interval '2 days', 'YYYY-MM-DD')
FROM generate_series(1, $1::bigint) k
