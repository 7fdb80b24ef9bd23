-- `almanac outbox pause|resume TOPIC`: $2 paused or not, $3 why, $4 origin. No host
-- delivers a paused topic's messages; they wait pending. Recorded when it changes.
WITH old AS (
    SELECT paused FROM almanac.outbox_topics WHERE topic = $1 FOR UPDATE
), changed AS (
    UPDATE almanac.outbox_topics t SET paused = $2, paused_reason = CASE WHEN $2 THEN $3 END
    FROM old
    WHERE t.topic = $1
    RETURNING old.paused AS was
), recorded AS (
    INSERT INTO almanac.changes (topic, revision, action, before, after, origin, reason)
    SELECT $1, 0, CASE WHEN $2 THEN 'outbox-pause' ELSE 'outbox-resume' END, to_jsonb(was), to_jsonb($2), $4, $3
    FROM changed
    WHERE was <> $2
)
SELECT was FROM changed
