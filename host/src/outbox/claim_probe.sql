-- The message that probes topic $1's receiver: its oldest pending one, due or not (the
-- circuit, not the message's own backoff, says when to try).
SELECT id, topic, key, payload, content_type, attempts, task, created_at
FROM almanac.outbox
WHERE status = 'pending' AND topic = $1
ORDER BY next_attempt_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED
