-- In the job's own transaction, after rolling back to its savepoint: the attempt (its
-- count was raised by the claim) is recorded on the job, over the claim's done mark, and
-- in the attempt history, even though the plugin's writes are gone; the done count the
-- claim added is taken back. $5 = give up now;
-- $6 = backoff in seconds.
WITH failed AS (
    UPDATE almanac.jobs
    SET last_error = $4,
        status = CASE WHEN $5 THEN 'failed' ELSE 'pending' END,
        completed_at = CASE WHEN $5 THEN now() END,
        run_after = now() + make_interval(secs => $6),
        plugin_digest = $7
    WHERE task = $1 AND slot = $2 AND key = $3
    RETURNING task, slot, key, attempts, last_error, plugin_digest
), uncounted AS (
    INSERT INTO almanac.done_counts (task, month, done)
    SELECT task, date_trunc('month', slot, 'UTC'), -1 FROM failed
)
INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest)
SELECT task, slot, key, attempts, last_error, plugin_digest FROM failed
