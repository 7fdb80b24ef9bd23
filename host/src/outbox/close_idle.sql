-- A leased topic with nothing pending to probe with: its circuit closes (nothing waits,
-- and the next message gets an ordinary try; if the receiver is still down, that opens it
-- again). Returns whether it was open.
UPDATE almanac.outbox_topics SET failures = 0, opened_at = NULL, open_until = NULL
WHERE topic = $1
RETURNING true
