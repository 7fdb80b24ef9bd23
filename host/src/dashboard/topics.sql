-- Outbox messages per topic and state: pending and dead through their partial indexes,
-- delivered from almanac.delivered_counts (never the history).
WITH waiting AS (
    SELECT topic,
           count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'dead')    AS dead
    FROM ONLY almanac.outbox
    WHERE status IN ('pending', 'dead')
    GROUP BY topic
), delivered AS (
    SELECT topic, sum(delivered)::bigint AS delivered FROM almanac.delivered_counts GROUP BY topic
)
SELECT coalesce(w.topic, d.topic) AS topic, coalesce(w.pending, 0), coalesce(w.dead, 0), coalesce(d.delivered, 0)
FROM waiting w
FULL JOIN delivered d ON d.topic = w.topic
ORDER BY 1
