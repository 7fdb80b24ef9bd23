-- In the claiming transaction: one failed attempt per message. Per message: $1 id,
-- $2 error, $3 give up now (dead), $4 backoff in seconds before the next try.
UPDATE almanac.outbox o
SET attempts = o.attempts + 1,
    last_error = f.error,
    status = CASE WHEN f.dead THEN 'dead' ELSE 'pending' END,
    next_attempt_at = now() + make_interval(secs => f.delay)
FROM unnest($1::bigint[], $2::text[], $3::boolean[], $4::float8[]) AS f (id, error, dead, delay)
WHERE o.id = f.id
