-- `almanac discard`: pending or failed jobs that must never run. Kept (their identity
-- still stops a backfill from creating them again), never claimed, pruned like done
-- jobs; one change row records the command. A job running now is waited for, and left
-- alone if it finished.
WITH discarded AS (
    UPDATE almanac.jobs
    SET status = 'discarded', completed_at = now(), last_error = 'discarded: ' || $5
    WHERE task = $1
      AND status IN ('pending', 'failed')
      AND ($2::timestamptz IS NULL OR slot = $2)
      AND ($3::text IS NULL OR key = $3)
    RETURNING 1
), recorded AS (
    INSERT INTO almanac.changes (task, revision, action, after, origin, reason)
    SELECT $1, coalesce((SELECT revision FROM ONLY almanac.schedules WHERE task = $1), 0), 'discard',
           jsonb_build_object('jobs', count(*), 'slot', $2::timestamptz, 'key', $3::text), $4, $5
    FROM discarded
    HAVING count(*) > 0
)
SELECT count(*) FROM discarded
