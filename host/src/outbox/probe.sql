-- The lease to probe topic $1's receiver: the circuit stays open for another cooldown
-- ($2 seconds) for every other worker and host; NULL when another holds the lease or
-- probed within the cooldown. The row stays locked until the round commits.
UPDATE almanac.outbox_topics t
SET open_until = now() + make_interval(secs => $2)
FROM (SELECT topic FROM almanac.outbox_topics
      WHERE topic = $1 AND NOT paused AND (open_until IS NULL OR open_until <= now())
      FOR UPDATE SKIP LOCKED) free
WHERE t.topic = free.topic
RETURNING t.topic
