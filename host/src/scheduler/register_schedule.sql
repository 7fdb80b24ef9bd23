-- A task's effective schedule. A new task's cursor starts at start_at ($5), by default
-- now: deploying a task never backfills history by surprise. An existing cursor is never
-- moved here. $6 forces the paused flag; NULL leaves it as operators set it. $7 is the
-- backfill horizon in seconds.
INSERT INTO almanac.schedules (task, cron, zone, catch_up, generated_through, paused, horizon)
VALUES ($1, $2, $3, $4, coalesce($5, now()), coalesce($6, false), make_interval(secs => $7))
ON CONFLICT (task) DO UPDATE
SET cron = EXCLUDED.cron, zone = EXCLUDED.zone, catch_up = EXCLUDED.catch_up,
    paused = coalesce($6, almanac.schedules.paused), horizon = EXCLUDED.horizon, updated_at = now()
