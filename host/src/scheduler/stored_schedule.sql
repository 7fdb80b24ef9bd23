-- One task's stored schedule and settings (`almanac apply` appends FOR UPDATE: it
-- waits for a tick in progress, and the tick after it sees the change).
SELECT cron, zone, catch_up, extract(epoch FROM horizon)::float8, revision, generated_through, paused, settings, period, period_from, period_before, business, expect_jobs, after
FROM ONLY almanac.schedules
WHERE task = $1
