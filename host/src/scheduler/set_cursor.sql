-- Move a schedule's cursor (`almanac cursor`, the demo's simulated outage), recorded
-- with the value it had.
WITH old AS (
    SELECT generated_through FROM ONLY almanac.schedules WHERE task = $1 FOR UPDATE
), moved AS (
    UPDATE ONLY almanac.schedules s
    SET generated_through = $2, revision = s.revision + 1, updated_at = now()
    FROM old
    WHERE s.task = $1
    RETURNING s.revision
)
INSERT INTO almanac.changes (task, revision, action, before, after, origin, reason)
SELECT $1, moved.revision, 'cursor', to_jsonb(old.generated_through), to_jsonb($2::timestamptz), $3, $4
FROM old, moved
RETURNING (before #>> '{}')::timestamptz
