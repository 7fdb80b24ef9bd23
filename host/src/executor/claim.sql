-- Claim up to $2 due jobs of the tasks this host has loaded ($1). Reads only the
-- partial index on pending rows; rows another host has locked are skipped, not waited
-- for. The lock is held until the claiming transaction commits.
SELECT task, slot, key, attempts, payload::text, crashes, last_error
FROM ONLY almanac.jobs
WHERE status = 'pending'
  AND run_after <= now()
  AND task = ANY($1::text[])
ORDER BY run_after, slot, task, key
LIMIT $2
FOR UPDATE SKIP LOCKED
