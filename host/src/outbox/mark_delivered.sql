-- In the claiming transaction, after the sinks took the messages ($1: their ids); the
-- delivered count (almanac.delivered_counts) gains them in the same statement.
WITH delivered AS (
    UPDATE almanac.outbox
    SET status = 'delivered', attempts = attempts + 1, dispatched_at = now(), last_error = NULL
    WHERE id = ANY($1::bigint[])
    RETURNING task, topic
)
INSERT INTO almanac.delivered_counts (task, topic, delivered)
SELECT task, topic, count(*) FROM delivered GROUP BY 1, 2
