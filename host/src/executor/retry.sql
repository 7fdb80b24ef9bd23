-- Failed jobs back to pending with a fresh count of attempts; the old attempts stay in
-- almanac.attempts.
UPDATE almanac.jobs
SET status = 'pending', attempts = 0, run_after = now(), completed_at = NULL, retries = retries + 1
WHERE status = 'failed'
  AND task = $1
  AND ($2::timestamptz IS NULL OR slot = $2)
  AND ($3::text IS NULL OR key = $3)
