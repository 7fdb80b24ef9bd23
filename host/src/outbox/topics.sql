-- Every topic's health, as `almanac status` and /metrics show it: paused, circuit open
-- (since when, failures in a row, the last error), failures ever, and what waits in it.
SELECT t.topic, t.paused, t.paused_reason, t.opened_at, t.failures, t.failures_total, t.last_error,
       coalesce(p.pending, 0) AS pending, p.oldest_s
FROM almanac.outbox_topics t
LEFT JOIN LATERAL (
    SELECT count(*) AS pending, extract(epoch FROM now() - min(o.created_at))::float8 AS oldest_s
    FROM almanac.outbox o WHERE o.status = 'pending' AND o.topic = t.topic
) p ON true
ORDER BY t.topic
