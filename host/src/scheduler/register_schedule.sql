-- A task's schedule, if it has none yet: its cursor starts at start_at ($5), by default
-- now (deploying a task never backfills history by surprise); $6 is the initial paused
-- flag, $7 the backfill horizon in seconds. An existing schedule is never changed here:
-- that is `almanac apply`'s (apply_schedule.sql). $2 NULL: an on-demand task. $8: the
-- calendar published for almanac.enqueue's check; $9 the settings (secrets as digests), $10 the period unit,
-- $11 the business calendar's source (NULL: none), $12 whether every period should have jobs,
-- $13 the tasks its jobs of a period wait for.
INSERT INTO almanac.schedules (task, cron, zone, catch_up, generated_through, paused, horizon, calendar, settings, period, business, expect_jobs, after)
VALUES ($1, $2, $3, $4, coalesce($5, now()), coalesce($6, false), make_interval(secs => $7), $8, $9, $10, $11, $12, $13)
ON CONFLICT (task) DO NOTHING
RETURNING revision, generated_through
