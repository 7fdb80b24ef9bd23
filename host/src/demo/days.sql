-- Per period of task $1: its instant, jobs generated, ledger rows, points paid.
SELECT s.slot, s.jobs, count(l.*), coalesce(sum(l.points), 0)::bigint, s.period
FROM ONLY almanac.slots s LEFT JOIN points_ledger l ON l.task = s.task AND l.period = s.period
WHERE s.task = $1 GROUP BY s.slot, s.jobs, s.period ORDER BY s.slot
