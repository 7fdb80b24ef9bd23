-- One task's stored schedule, locked when $2 (an apply or a cursor move waits for a
-- tick in progress, and the tick after it sees the change).
SELECT cron, zone, catch_up, extract(epoch FROM horizon)::float8, revision, generated_through, paused
FROM ONLY almanac.schedules
WHERE task = $1
