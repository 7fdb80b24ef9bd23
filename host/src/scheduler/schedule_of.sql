-- One task's cron, zone and business calendar, as stored, and the tasks its jobs of a
-- period wait for.
SELECT cron, zone, business, after FROM ONLY almanac.schedules WHERE task = $1
