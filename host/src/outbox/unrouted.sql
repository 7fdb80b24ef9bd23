-- Topics with pending messages that no sink of this host takes and that were not yet
-- reported ($1), with how many are waiting.
SELECT topic, count(*)
FROM almanac.outbox
WHERE status = 'pending'
  AND NOT (topic = ANY($1::text[]))
GROUP BY topic
ORDER BY topic
LIMIT 100
