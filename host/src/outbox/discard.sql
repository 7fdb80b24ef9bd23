-- `almanac outbox discard TOPIC [--key KEY] --reason WHY`: recall messages not yet
-- delivered (pending or dead); $2 matches a message's key or its Idempotency-Key
-- (`topic/key`, as the receiver logs it). They stay, `discarded`, with the reason and the
-- role that said so; no host delivers them. A message being delivered right now is
-- waited for: once delivered it is not discarded. Recorded ($4 origin).
WITH discarded AS (
    UPDATE almanac.outbox
    SET status = 'discarded', discarded_reason = $3, discarded_by = session_user, dispatched_at = now()
    WHERE status IN ('pending', 'dead') AND topic = $1 AND ($2::text IS NULL OR key = $2 OR topic || '/' || key = $2)
    RETURNING 1
), recorded AS (
    INSERT INTO almanac.changes (topic, revision, action, after, origin, reason)
    SELECT $1, 0, 'outbox-discard', jsonb_build_object('messages', count(*), 'key', $2::text), $4, $3
    FROM discarded
    HAVING count(*) > 0
)
SELECT count(*) FROM discarded
