-- A run's result: points paid, its slot's jobs done, ledger rows of its slot, and when
-- its last job completed.
SELECT (SELECT sum(points)::bigint FROM accounts),
       (SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND slot = $1 AND status = 'done'),
       (SELECT count(*) FROM points_ledger WHERE slot = $1),
       (SELECT max(completed_at) FROM almanac.jobs WHERE task = 'daily-points' AND slot = $1)
