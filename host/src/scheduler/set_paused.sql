-- `almanac pause` / `resume`: generated jobs still run; new slots wait while paused.
-- Recorded; a no-op (already so) is not.
WITH old AS (
    SELECT paused FROM ONLY almanac.schedules WHERE task = $1 FOR UPDATE
), changed AS (
    UPDATE ONLY almanac.schedules s
    SET paused = $2, revision = s.revision + 1, updated_at = now()
    FROM old
    WHERE s.task = $1 AND old.paused <> $2
    RETURNING s.revision
), recorded AS (
    INSERT INTO almanac.changes (task, revision, action, before, after, origin, reason)
    SELECT $1, changed.revision, CASE WHEN $2 THEN 'pause' ELSE 'resume' END,
           to_jsonb(NOT $2), to_jsonb($2), $3, $4
    FROM changed
)
SELECT paused FROM old
