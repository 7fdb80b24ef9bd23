-- One task's cron and zone, as stored.
SELECT cron, zone FROM ONLY almanac.schedules WHERE task = $1
