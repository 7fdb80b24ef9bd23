-- Outbox messages per topic and state (almanac.outbox_counts: never the delivered history),
-- with each topic's health: paused, circuit open, the last delivery error.
SELECT c.topic, sum(c.pending)::bigint AS pending, sum(c.dead)::bigint AS dead, sum(c.delivered)::bigint AS delivered,
       coalesce(bool_or(t.paused), false) AS paused, bool_or(t.opened_at IS NOT NULL) IS TRUE AS open,
       max(t.last_error) FILTER (WHERE t.failures > 0) AS last_error
FROM almanac.outbox_counts c
LEFT JOIN almanac.outbox_topics t ON t.topic = c.topic
GROUP BY c.topic
ORDER BY c.topic
