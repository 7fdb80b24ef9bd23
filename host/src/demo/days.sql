-- Per slot of task $1: jobs generated, ledger rows, points paid.
SELECT s.slot, s.jobs, count(l.*), coalesce(sum(l.points), 0)::bigint
FROM ONLY almanac.slots s LEFT JOIN points_ledger l ON l.task = s.task AND l.slot = s.slot
WHERE s.task = $1 GROUP BY s.slot, s.jobs ORDER BY s.slot
