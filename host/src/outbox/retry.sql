-- `almanac outbox retry [--topic T] [--key K]`: dead messages back to pending with a
-- fresh count of attempts, due now. $2 matches the message's key or its Idempotency-Key
-- (`topic/key`, as the receiver logs it). The last error stays until the message is
-- delivered. One change row per topic records the act ($3 origin).
WITH retried AS (
    UPDATE almanac.outbox
    SET status = 'pending', attempts = 0, next_attempt_at = now()
    WHERE status = 'dead'
      AND ($1::text IS NULL OR topic = $1)
      AND ($2::text IS NULL OR key = $2 OR topic || '/' || key = $2)
    RETURNING topic
), recorded AS (
    INSERT INTO almanac.changes (topic, revision, action, after, origin)
    SELECT topic, 0, 'outbox-retry', jsonb_build_object('messages', count(*), 'key', $2::text), $3
    FROM retried GROUP BY topic
)
SELECT count(*) FROM retried
