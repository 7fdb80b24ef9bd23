-- The newest failed attempts (the attempt history is append-only, so its id orders it),
-- with where each job stands now: failed for good, waiting to retry, or done since.
SELECT a.task, a.slot, a.key, a.attempt, left(a.error, 4096) AS error, a.failed_at, j.status
FROM ONLY almanac.attempts a
LEFT JOIN ONLY almanac.jobs j ON (j.task, j.slot, j.key) = (a.task, a.slot, a.key)
ORDER BY a.id DESC
LIMIT $1
