-- The period unit of each stored task of $1 (those a task comes after), and the tasks
-- each of them comes after in turn.
SELECT task, period, after FROM ONLY almanac.schedules WHERE task = ANY($1)
