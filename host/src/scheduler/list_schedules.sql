-- Every schedule, for `almanac schedules`.
SELECT task, cron, zone, catch_up, paused, generated_through, business FROM ONLY almanac.schedules ORDER BY task
