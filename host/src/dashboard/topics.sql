-- Outbox messages per topic and state (almanac.outbox_counts: never the delivered history),
-- with each topic's health: paused, circuit open, the last delivery error. A topic with no
-- message yet is listed too when it is configured, paused or its circuit is open.
SELECT k.topic, coalesce(sum(c.pending), 0)::bigint AS pending, coalesce(sum(c.dead), 0)::bigint AS dead,
       coalesce(sum(c.delivered), 0)::bigint AS delivered,
       coalesce(bool_or(t.paused), false) AS paused, bool_or(t.opened_at IS NOT NULL) IS TRUE AS open,
       max(t.last_error) FILTER (WHERE t.failures > 0) AS last_error
FROM (SELECT topic FROM almanac.outbox_counts
      UNION SELECT topic FROM almanac.outbox_topics WHERE configured OR paused OR opened_at IS NOT NULL) k
LEFT JOIN almanac.outbox_counts c ON c.topic = k.topic
LEFT JOIN almanac.outbox_topics t ON t.topic = k.topic
GROUP BY k.topic
ORDER BY k.topic
