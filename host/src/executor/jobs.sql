-- `almanac jobs`: newest first, narrowed by $1 status, $2 task, $4 key (exact) and $5
-- key prefix when set.
SELECT task, slot, key, status, attempts, retries, run_after, completed_at, last_error, period
FROM almanac.jobs
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR task = $2)
  AND ($4::text IS NULL OR key = $4)
  AND ($5::text IS NULL OR starts_with(key, $5))
ORDER BY coalesce(completed_at, run_after) DESC, task, slot, key
LIMIT $3
