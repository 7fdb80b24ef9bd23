-- Messages per publishing task and status, for `almanac status` (almanac.outbox_counts:
-- never the delivered history).
SELECT task, sum(pending)::bigint, sum(dead)::bigint, sum(delivered)::bigint
FROM almanac.outbox_counts
GROUP BY task
