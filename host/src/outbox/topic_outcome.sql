-- In the claiming transaction, after delivery: each topic's breaker ($1 topics, $2
-- messages delivered, $3 failed, $4 the last error, $5 failures that open its circuit,
-- $6 its cooldown in seconds, counted from now, the round's end, not its start). A success
-- closes it; failures past the threshold open it.
-- Returns the topics whose circuit opened or closed in this round, with the new state.
-- The caller has locked the rows (lock_topics.sql), in topic order.
UPDATE almanac.outbox_topics t
SET failures   = CASE WHEN r.delivered > 0 THEN 0 ELSE t.failures + r.failed END,
    failures_total = t.failures_total + r.failed,
    opened_at  = CASE WHEN r.delivered > 0 THEN NULL
                      WHEN t.opened_at IS NULL AND t.failures + r.failed >= r.after THEN now()
                      ELSE t.opened_at END,
    open_until = CASE WHEN r.delivered > 0 THEN NULL
                      WHEN t.failures + r.failed >= r.after THEN greatest(t.open_until, clock_timestamp() + make_interval(secs => r.cooldown))
                      ELSE t.open_until END,
    last_error = CASE WHEN r.failed > 0 THEN r.error ELSE t.last_error END
FROM unnest($1::text[], $2::integer[], $3::integer[], $4::text[], $5::integer[], $6::float8[]) AS r (topic, delivered, failed, error, after, cooldown),
     (SELECT topic, opened_at IS NOT NULL AS was_open FROM almanac.outbox_topics WHERE topic = ANY($1::text[])) old
WHERE t.topic = r.topic AND old.topic = r.topic
  AND (r.delivered > 0 OR r.failed > 0)
RETURNING t.topic, old.was_open, t.opened_at IS NOT NULL AS is_open, t.failures, t.last_error
