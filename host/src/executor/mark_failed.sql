-- In the job's own transaction, after rolling back to its savepoint: the attempt is
-- recorded even though the plugin's writes are gone. $5 = give up now; $6 = backoff (s).
UPDATE almanac.jobs
SET attempts = attempts + 1,
    last_error = $4,
    status = CASE WHEN $5 THEN 'failed' ELSE 'pending' END,
    completed_at = CASE WHEN $5 THEN now() END,
    run_after = now() + make_interval(secs => $6),
    plugin_digest = $7
WHERE task = $1 AND slot = $2 AND key = $3
