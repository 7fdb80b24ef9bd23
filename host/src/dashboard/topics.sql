-- Outbox messages per topic and state.
SELECT topic,
       count(*) FILTER (WHERE status = 'pending')   AS pending,
       count(*) FILTER (WHERE status = 'dead')      AS dead,
       count(*) FILTER (WHERE status = 'delivered') AS delivered
FROM ONLY almanac.outbox
GROUP BY topic
ORDER BY topic
