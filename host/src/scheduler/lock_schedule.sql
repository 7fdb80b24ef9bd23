-- The cursor row, locked for this tick. SKIP LOCKED: if another scheduler holds it,
-- that one is generating and this one has nothing to do. The stored schedule comes
-- with it: hosts follow what was applied, whatever their own file says.
SELECT generated_through, paused, now(), revision, cron, zone, catch_up, (calendar->>'to')::date, settings, period, period_from, period_before, business, expect_jobs
FROM ONLY almanac.schedules
WHERE task = $1
FOR UPDATE SKIP LOCKED
