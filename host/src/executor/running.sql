-- Pending jobs that a worker holds locked right now, per task. Row locks are not listed
-- in pg_locks, so this probes the head of the claim order (where every claim takes its
-- rows) with a lock that conflicts with a claim's FOR UPDATE and skips what is held.
WITH head AS (
    SELECT task, slot, key FROM ONLY almanac.jobs
    WHERE status = 'pending' AND run_after <= now()
    ORDER BY run_after, slot, task, key
    LIMIT 10000
), free AS (
    SELECT j.task FROM ONLY almanac.jobs j
    WHERE (j.task, j.slot, j.key) IN (SELECT task, slot, key FROM head)
    FOR KEY SHARE OF j SKIP LOCKED
)
SELECT h.task, count(*) - (SELECT count(*) FROM free f WHERE f.task = h.task)
FROM head h GROUP BY h.task
