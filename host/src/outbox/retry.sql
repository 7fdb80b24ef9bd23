-- Dead messages back to pending with a fresh count of attempts, due now; $1 topic and
-- $2 key narrow it when set. The last error stays until the message is delivered.
UPDATE almanac.outbox
SET status = 'pending', attempts = 0, next_attempt_at = now()
WHERE status = 'dead'
  AND ($1::text IS NULL OR topic = $1)
  AND ($2::text IS NULL OR key = $2)
