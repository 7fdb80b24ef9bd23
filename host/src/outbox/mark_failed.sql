-- In the claiming transaction: one failed attempt per message. Per message: $1 id,
-- $2 error, $3 give up now (dead: a permanent refusal, or out of attempts), $4 backoff in
-- seconds before the next try, $5 the topic's retry budget in seconds: a message still
-- failing that long after it was published is dead. Returns the messages now dead, which
-- the console's per-minute counts gain in the same statement.
WITH failed AS (
    UPDATE almanac.outbox o
    SET attempts = o.attempts + 1,
        last_error = f.error,
        status = CASE WHEN f.dead OR o.created_at + make_interval(secs => f.budget) <= now() THEN 'dead' ELSE 'pending' END,
        next_attempt_at = now() + make_interval(secs => f.delay)
    FROM unnest($1::bigint[], $2::text[], $3::boolean[], $4::float8[], $5::float8[]) AS f (id, error, dead, delay, budget)
    WHERE o.id = f.id
    RETURNING o.id, o.topic, o.key, o.status = 'dead' AS dead
), per_minute AS (
    INSERT INTO almanac.topic_minutes (topic, minute, dead)
    SELECT topic, date_trunc('minute', now(), 'UTC'), count(*) FROM failed WHERE dead GROUP BY 1
)
SELECT id, topic, key, dead FROM failed
