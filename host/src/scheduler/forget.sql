-- `almanac forget`: the schedule goes, recorded with what it was; jobs stay (done and
-- discarded ones are the evidence that stops a backfill from repeating them).
WITH gone AS (
    DELETE FROM ONLY almanac.schedules WHERE task = $1
    RETURNING cron, zone, catch_up, horizon, generated_through
), plugin AS (
    DELETE FROM almanac.plugins WHERE name = $1
), recorded AS (
    INSERT INTO almanac.changes (task, revision, action, before, origin, reason)
    SELECT $1, 0, 'forget', to_jsonb(gone), $2, $3 FROM gone
)
SELECT count(*) FROM gone
