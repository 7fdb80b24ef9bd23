-- One bounded batch of delivered messages created before $1 from the outbox's default
-- partition (months outside every partition), taken out of the delivered counts, their
-- identities with them (almanac.outbox_keys).
WITH gone AS (
    DELETE FROM almanac.outbox_default
    WHERE ctid IN (
        SELECT ctid FROM almanac.outbox_default
        WHERE status = 'delivered' AND created_at < $1
        LIMIT 10000
    )
    RETURNING task, topic, key
), uncounted AS (
    INSERT INTO almanac.delivered_counts (task, topic, delivered)
    SELECT task, topic, -count(*) FROM gone GROUP BY 1, 2
), unkeyed AS (
    DELETE FROM almanac.outbox_keys k USING gone g WHERE k.topic = g.topic AND k.key = g.key
)
SELECT count(*) FROM gone
