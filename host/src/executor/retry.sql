-- Failed jobs back to pending with a fresh count of attempts; the old attempts stay in
-- almanac.attempts. Returns how many.
WITH retried AS (
    UPDATE almanac.jobs
    SET status = 'pending', attempts = 0, run_after = now(), completed_at = NULL, retries = retries + 1
    WHERE status = 'failed'
      AND task = $1
      AND ($2::timestamptz IS NULL OR slot = $2)
      AND ($3::text IS NULL OR key = $3)
    RETURNING task, slot
), counted AS (
    INSERT INTO almanac.job_counts (task, month, failed, pending)
    SELECT task, date_trunc('month', slot, 'UTC'), -count(*), count(*) FROM retried GROUP BY 1, 2
)
SELECT count(*) FROM retried
