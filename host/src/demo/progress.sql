-- Task $1: jobs done, jobs not done, and its cursor.
SELECT (SELECT count(*) FROM almanac.jobs WHERE task = $1 AND status = 'done'),
       (SELECT count(*) FROM almanac.jobs WHERE task = $1 AND status <> 'done'),
       (SELECT generated_through FROM ONLY almanac.schedules WHERE task = $1)
