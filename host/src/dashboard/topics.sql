-- Outbox messages per topic and state (almanac.outbox_counts: never the delivered history).
SELECT topic, sum(pending)::bigint, sum(dead)::bigint, sum(delivered)::bigint
FROM almanac.outbox_counts
GROUP BY topic
ORDER BY topic
