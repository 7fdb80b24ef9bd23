SELECT task, slot, key, status, attempts, retries, run_after, completed_at, last_error
FROM almanac.jobs
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR task = $2)
ORDER BY coalesce(completed_at, run_after) DESC, task, slot, key
LIMIT $3
