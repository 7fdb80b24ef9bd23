-- How far back a backfill of task $1 may reach.
SELECT extract(epoch FROM horizon)::float8 FROM ONLY almanac.schedules WHERE task = $1
