-- One job ($1 task, $2 slot, $3 key), as its page shows it.
SELECT task, slot, key, status, attempts, retries, run_after, completed_at, last_error, period,
       payload::text, plugin_digest, created_at, crashes, transients
FROM almanac.jobs
WHERE task = $1 AND slot = $2 AND key = $3
