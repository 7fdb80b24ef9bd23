-- A task's effective schedule. A new task's cursor starts now: deploying a task never
-- backfills history by surprise. An existing cursor is never moved here.
INSERT INTO almanac.schedules (task, cron, zone, catch_up, generated_through)
VALUES ($1, $2, $3, $4, now())
ON CONFLICT (task) DO UPDATE
SET cron = EXCLUDED.cron, zone = EXCLUDED.zone, catch_up = EXCLUDED.catch_up, updated_at = now()
WHERE (almanac.schedules.cron, almanac.schedules.zone, almanac.schedules.catch_up)
      IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.zone, EXCLUDED.catch_up)
