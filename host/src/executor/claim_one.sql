-- Claim one named job ($1, $2, $3), if it is still pending and no one holds it, marked
-- done as claim.sql marks them (its plugin's digest $4): a job marked by a crash runs in
-- a transaction of its own.
WITH due AS (
    SELECT task, slot, key, attempts, last_error, plugin_digest, run_after
    FROM almanac.jobs
    WHERE task = $1 AND slot = $2 AND key = $3
      AND status = 'pending'
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE almanac.jobs AS j
    SET status = 'done', attempts = due.attempts + 1, completed_at = now(),
        plugin_digest = $4, last_error = NULL
    FROM due
    WHERE j.task = due.task AND j.slot = due.slot AND j.key = due.key
    RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest, due.run_after
), counted AS (
    INSERT INTO almanac.job_counts (task, month, pending, done)
    SELECT task, date_trunc('month', slot, 'UTC'), -count(*), count(*) FROM claimed GROUP BY 1, 2
)
SELECT * FROM claimed
