-- In the job's own transaction, after rolling back to its savepoint: the attempt (its
-- count was raised by the claim) is recorded on the job, over the claim's done mark, and
-- in the attempt history, even though the plugin's writes are gone; the counts the
-- claim moved to done move to where the job is now. $5 = give up now;
-- $6 = backoff in seconds.
WITH failed AS (
    UPDATE almanac.jobs
    SET last_error = $4,
        status = CASE WHEN $5 THEN 'failed' ELSE 'pending' END,
        completed_at = CASE WHEN $5 THEN now() END,
        run_after = now() + make_interval(secs => $6),
        plugin_digest = $7
    WHERE task = $1 AND slot = $2 AND key = $3
    RETURNING task, slot, key, attempts, last_error, plugin_digest, status
), counted AS (
    INSERT INTO almanac.job_counts (task, month, done, pending, failed)
    SELECT task, date_trunc('month', slot, 'UTC'), -1, (status = 'pending')::int, (status = 'failed')::int FROM failed
)
INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest)
SELECT task, slot, key, attempts, last_error, plugin_digest FROM failed
