-- `almanac retry`: failed jobs back to pending with a fresh count of attempts; the old
-- attempts stay in almanac.attempts. One change row records the command ($4 origin).
-- Which: $1 task, optionally $2 one slot, $3 one key, slots from $5 and before $6.
-- Returns how many.
WITH retried AS (
    UPDATE almanac.jobs
    SET status = 'pending', attempts = 0, run_after = now(), completed_at = NULL, retries = retries + 1
    WHERE status = 'failed'
      AND task = $1
      AND ($2::timestamptz IS NULL OR slot = $2)
      AND ($3::text IS NULL OR key = $3)
      AND ($5::timestamptz IS NULL OR slot >= $5)
      AND ($6::timestamptz IS NULL OR slot < $6)
    RETURNING task, slot
), counted AS (
    INSERT INTO almanac.job_counts (task, month, failed, pending)
    SELECT task, date_trunc('month', slot, 'UTC'), -count(*), count(*) FROM retried GROUP BY 1, 2
), recorded AS (
    INSERT INTO almanac.changes (task, revision, action, after, origin)
    SELECT $1, coalesce((SELECT revision FROM ONLY almanac.schedules WHERE task = $1), 0), 'retry',
           jsonb_build_object('jobs', count(*), 'slot', $2::timestamptz, 'key', $3::text, 'from', $5::timestamptz, 'to', $6::timestamptz), $4
    FROM retried
    HAVING count(*) > 0
)
SELECT count(*) FROM retried
