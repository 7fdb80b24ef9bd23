-- The period unit of each stored task of $1 (those a task comes after).
SELECT task, period FROM ONLY almanac.schedules WHERE task = ANY($1)
