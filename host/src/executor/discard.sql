-- `almanac discard`: pending or failed jobs that must never run. Kept (their identity
-- still stops a backfill from creating them again), never claimed, pruned like done
-- jobs; one change row records the command. A job running now is waited for, and left
-- alone if it finished. Which: $1 task, optionally $2 one slot, $3 one key, slots from
-- $6 and before $7; $4 origin, $5 reason.
WITH target AS (
    SELECT task, slot, key, status AS was
    FROM almanac.jobs
    WHERE task = $1
      AND status IN ('pending', 'failed')
      AND ($2::timestamptz IS NULL OR slot = $2)
      AND ($3::text IS NULL OR key = $3)
      AND ($6::timestamptz IS NULL OR slot >= $6)
      AND ($7::timestamptz IS NULL OR slot < $7)
    FOR UPDATE
), discarded AS (
    UPDATE almanac.jobs AS j
    SET status = 'discarded', completed_at = now(), last_error = 'discarded: ' || $5
    FROM target t
    WHERE (j.task, j.slot, j.key) = (t.task, t.slot, t.key)
    RETURNING j.task, j.slot, t.was
), counted AS (
    INSERT INTO almanac.job_counts (task, month, pending, failed, discarded)
    SELECT task, date_trunc('month', slot, 'UTC'), -count(*) FILTER (WHERE was = 'pending'),
           -count(*) FILTER (WHERE was = 'failed'), count(*)
    FROM discarded GROUP BY 1, 2
), recorded AS (
    INSERT INTO almanac.changes (task, revision, action, after, origin, reason)
    SELECT $1, coalesce((SELECT revision FROM ONLY almanac.schedules WHERE task = $1), 0), 'discard',
           jsonb_build_object('jobs', count(*), 'slot', $2::timestamptz, 'key', $3::text, 'from', $6::timestamptz, 'to', $7::timestamptz), $4, $5
    FROM discarded
    HAVING count(*) > 0
)
SELECT count(*) FROM discarded
