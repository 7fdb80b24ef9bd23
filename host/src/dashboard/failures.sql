-- Jobs with the newest failed attempts, one row per job: its latest failed attempt, how
-- many attempts it has failed in all, and where it stands now (failed for good, waiting
-- to retry, or done since). Only the newest attempts are read (the history is
-- append-only, its id orders it), so years of history cost nothing; a job's count comes
-- from its own entries in attempts_job.
WITH recent AS (
    SELECT id, task, slot, key, attempt, error, failed_at
    FROM ONLY almanac.attempts
    ORDER BY id DESC
    LIMIT 2000
), latest AS (
    SELECT DISTINCT ON (task, slot, key) *
    FROM recent
    ORDER BY task, slot, key, id DESC
)
SELECT l.task, l.slot, l.key, l.attempt, left(l.error, 4096) AS error, l.failed_at, j.status,
       (SELECT count(*) FROM ONLY almanac.attempts c WHERE (c.task, c.slot, c.key) = (l.task, l.slot, l.key)) AS failures
FROM latest l
LEFT JOIN almanac.jobs j ON (j.task, j.slot, j.key) = (l.task, l.slot, l.key)
ORDER BY l.id DESC
LIMIT $1
