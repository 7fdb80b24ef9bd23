-- Outbox messages waiting (pending) or given up on (dead), per topic. Both states have
-- partial indexes, so delivered history does not make this slower.
SELECT topic, status, count(*)
FROM almanac.outbox
WHERE status = 'pending'
GROUP BY topic, status
UNION ALL
SELECT topic, status, count(*)
FROM almanac.outbox
WHERE status = 'dead'
GROUP BY topic, status
