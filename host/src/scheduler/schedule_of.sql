-- One task's cron, zone and business calendar, as stored.
SELECT cron, zone, business FROM ONLY almanac.schedules WHERE task = $1
