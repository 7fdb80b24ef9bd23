-- `almanac apply`: the new schedule, settings and period unit (from $10 when it changed, $11 the unit before), the business calendar's source ($12) expect_jobs ($13) and the tasks its jobs wait for ($14), the cursor where it takes over, the next revision.
UPDATE ONLY almanac.schedules
SET cron = $2, zone = $3, catch_up = $4, horizon = make_interval(secs => $5), generated_through = $6, calendar = $7,
    settings = $8, period = $9, period_from = $10, period_before = $11, business = $12, expect_jobs = $13, after = $14,
    revision = revision + 1, updated_at = now()
WHERE task = $1
RETURNING revision
