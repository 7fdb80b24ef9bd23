-- `almanac outbox pause|resume TOPIC`: $2 paused or not, $3 why. No host delivers a
-- paused topic's messages; they wait pending.
UPDATE almanac.outbox_topics SET paused = $2, paused_reason = CASE WHEN $2 THEN $3 END
WHERE topic = $1
RETURNING topic
