-- The lease to probe topic $1's receiver: its row, locked (not changed, so publishers'
-- inserts of the topic do not wait on it) until the round commits; NULL when another
-- round holds it, or the cooldown since the last failed probe is not over.
SELECT topic FROM almanac.outbox_topics
WHERE topic = $1 AND NOT paused AND (open_until IS NULL OR open_until <= now())
FOR UPDATE SKIP LOCKED
