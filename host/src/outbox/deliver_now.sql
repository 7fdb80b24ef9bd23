-- `almanac outbox deliver-now TOPIC [--key KEY]`: the topic's pending messages (or the
-- one whose key or Idempotency-Key is $2) are due now, and its circuit is closed: the
-- operator says the receiver is back. If it is not, the breaker opens again after as
-- many failures as before. Recorded ($3 origin); returns how many messages.
WITH closed AS (
    UPDATE almanac.outbox_topics SET failures = 0, opened_at = NULL, open_until = NULL WHERE topic = $1
), due AS (
    UPDATE almanac.outbox SET next_attempt_at = now()
    WHERE status = 'pending' AND topic = $1 AND ($2::text IS NULL OR key = $2 OR topic || '/' || key = $2)
    RETURNING 1
), recorded AS (
    INSERT INTO almanac.changes (topic, revision, action, after, origin)
    SELECT $1, 0, 'outbox-deliver-now', jsonb_build_object('messages', count(*), 'key', $2::text), $3
    FROM due
    HAVING count(*) > 0 OR $2::text IS NULL
)
SELECT count(*) FROM due
