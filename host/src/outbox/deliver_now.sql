-- `almanac outbox deliver-now TOPIC [--key KEY]`: the topic's pending messages (or the
-- one keyed $2) are due now, and its circuit is closed: the operator says the receiver
-- is back. If it is not, the breaker opens again after as many failures as before.
WITH closed AS (
    UPDATE almanac.outbox_topics SET failures = 0, opened_at = NULL, open_until = NULL WHERE topic = $1
)
UPDATE almanac.outbox SET next_attempt_at = now()
WHERE status = 'pending' AND topic = $1 AND ($2::text IS NULL OR key = $2)
