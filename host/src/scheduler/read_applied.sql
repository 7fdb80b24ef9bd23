-- An on-demand task's stored record, laid out as lock_schedule.sql's (nothing to
-- generate, so nothing to lock): a host follows its settings.
SELECT NULL::timestamptz, paused, now(), revision, cron, zone, catch_up, NULL::date, settings, period, period_from, period_before, business, expect_jobs
FROM ONLY almanac.schedules
WHERE task = $1
