-- Claim one named job, if it is still pending and no one holds it: a job marked by a
-- crash runs in a transaction of its own.
SELECT task, slot, key, attempts, payload::text, crashes, last_error
FROM ONLY almanac.jobs
WHERE task = $1 AND slot = $2 AND key = $3
  AND status = 'pending'
FOR UPDATE SKIP LOCKED
