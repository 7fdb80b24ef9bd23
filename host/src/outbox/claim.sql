-- Claim up to $2 due pending messages of the topics this round may deliver ($1: routed,
-- not paused, circuit closed). Reads only the partial index on pending rows; rows
-- another host holds are skipped, not waited for. The lock is held while the message is
-- delivered, until COMMIT, so no two hosts deliver one message at the same time.
SELECT id, topic, key, payload, content_type, attempts, task, created_at
FROM almanac.outbox
WHERE status = 'pending'
  AND next_attempt_at <= now()
  AND topic = ANY($1::text[])
ORDER BY next_attempt_at, id
LIMIT $2
FOR UPDATE SKIP LOCKED
