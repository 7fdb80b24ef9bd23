-- In the claiming transaction, after the sinks took the messages ($1: their ids); the
-- delivered counts (almanac.delivered_counts, and the console's per minute) gain them in
-- the same statement.
WITH delivered AS (
    UPDATE almanac.outbox
    SET status = 'delivered', attempts = attempts + 1, dispatched_at = now(), last_error = NULL
    WHERE id = ANY($1::bigint[])
    RETURNING task, topic
), per_minute AS (
    INSERT INTO almanac.topic_minutes (topic, minute, delivered)
    SELECT topic, date_trunc('minute', now(), 'UTC'), count(*) FROM delivered GROUP BY 1
)
INSERT INTO almanac.delivered_counts (task, topic, delivered)
SELECT task, topic, count(*) FROM delivered GROUP BY 1, 2
