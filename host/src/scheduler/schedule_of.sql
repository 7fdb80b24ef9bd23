-- One task's cron, zone and business calendar, as stored, the tasks its jobs of a period
-- wait for, and its cursor.
SELECT cron, zone, business, after, generated_through FROM ONLY almanac.schedules WHERE task = $1
