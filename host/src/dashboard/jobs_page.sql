-- The console's list of task $1's jobs: status $2, slots from $3 until $4, key $5 exactly
-- or starting with $6 (each if set), after the page that ended at ($7 slot, $8 key);
-- newest period first, at most $9. Walks the primary key (task, slot, key) backwards.
SELECT task, slot, key, status, attempts, retries, run_after, completed_at, last_error, period
FROM almanac.jobs
WHERE task = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::timestamptz IS NULL OR slot >= $3)
  AND ($4::timestamptz IS NULL OR slot < $4)
  AND ($5::text IS NULL OR key = $5)
  AND ($6::text IS NULL OR starts_with(key, $6))
  AND ($7::timestamptz IS NULL OR (slot, key) < ($7, $8))
ORDER BY slot DESC, key DESC
LIMIT $9
