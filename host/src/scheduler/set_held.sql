-- `almanac hold` / `release` ($2 true / false): whether TASK's jobs may start (checked by
-- the claim itself: migrations/V15__hold.sql). Recorded; a no-op (already so) is not.
-- Answers what it was, with the task's pending jobs.
WITH old AS (
    SELECT held, revision FROM ONLY almanac.schedules WHERE task = $1 FOR UPDATE
), changed AS (
    UPDATE ONLY almanac.schedules s
    SET held = $2, held_reason = CASE WHEN $2 THEN coalesce($4, 'held by ' || $3) END, updated_at = now()
    FROM old
    WHERE s.task = $1 AND old.held <> $2
    RETURNING s.revision
), recorded AS (
    INSERT INTO almanac.changes (task, revision, action, before, after, origin, reason)
    SELECT $1, changed.revision, CASE WHEN $2 THEN 'hold' ELSE 'release' END,
           to_jsonb(NOT $2), to_jsonb($2), $3, $4
    FROM changed
)
SELECT old.held, coalesce((SELECT c.pending FROM almanac.task_counts c WHERE c.task = $1), 0)::bigint FROM old
