-- One job by identity, from an operator: through almanac.enqueue itself (migrations V7,
-- V10, V11, V24), so `almanac enqueue` refuses what an application's enqueue refuses (a
-- key over 1,024 bytes, a payload over 1 MiB, a year outside 1 to 9999) and counts the
-- job on its period as any enqueue does. $5: the slot was checked against the task's
-- calendar by the host already (or the operator said --off-calendar); $6: not before
-- then (NULL: its slot). A job it creates is recorded ($7 origin).
WITH enqueued AS (
    SELECT almanac.enqueue($1, $2, $3, $4, $6, $5) AS created
), recorded AS (
    INSERT INTO almanac.changes (task, revision, action, after, origin)
    SELECT $1, coalesce((SELECT revision FROM ONLY almanac.schedules WHERE task = $1), 0), 'enqueue',
           jsonb_build_object('slot', $2::timestamptz, 'key', $3::text, 'run_after', $6::timestamptz), $7
    FROM enqueued
    WHERE created
)
SELECT created FROM enqueued
