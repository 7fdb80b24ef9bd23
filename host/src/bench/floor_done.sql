-- The floor's done mark, in the job's own transaction after its work.
UPDATE almanac.jobs
SET status = 'done', attempts = attempts + 1, completed_at = now(),
    plugin_digest = $4, last_error = NULL
WHERE task = $1 AND slot = $2 AND key = $3
