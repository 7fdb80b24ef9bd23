-- The latest period the ledger holds for task $1 while it has no schedule (it was
-- forgotten): a schedule registered again must name its periods the same way.
SELECT l.period FROM almanac.slots l
WHERE l.task = $1 AND NOT EXISTS (SELECT 1 FROM ONLY almanac.schedules s WHERE s.task = $1)
ORDER BY l.slot DESC
LIMIT 1
