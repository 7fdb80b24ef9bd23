-- In the claiming transaction, after the sinks took the messages ($1: their ids).
UPDATE ONLY almanac.outbox
SET status = 'delivered', attempts = attempts + 1, dispatched_at = now(), last_error = NULL
WHERE id = ANY($1::bigint[])
