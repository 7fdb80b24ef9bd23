-- The floor's claim (the seed's loop): lock up to $2 due jobs of the tasks ($1); the done
-- mark follows each job as its own statement (floor_done.sql).
SELECT task, slot, key, attempts, payload::text, crashes, last_error, period
FROM almanac.jobs
WHERE status = 'pending'
  AND run_after <= now()
  AND task = ANY($1::text[])
ORDER BY run_after, slot, task, key
LIMIT $2
FOR UPDATE SKIP LOCKED
