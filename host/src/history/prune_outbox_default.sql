-- One bounded batch of delivered messages created before $1 from the outbox's default
-- partition (months outside every partition), taken out of the delivered counts.
WITH gone AS (
    DELETE FROM almanac.outbox_default
    WHERE ctid IN (
        SELECT ctid FROM almanac.outbox_default
        WHERE status = 'delivered' AND created_at < $1
        LIMIT 10000
    )
    RETURNING task, topic
), uncounted AS (
    INSERT INTO almanac.delivered_counts (task, topic, delivered)
    SELECT task, topic, -count(*) FROM gone GROUP BY 1, 2
)
SELECT count(*) FROM gone
