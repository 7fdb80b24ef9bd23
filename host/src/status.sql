-- Per task: its schedule (if any) and its job counts. "running" is pending rows that a
-- worker has locked right now (pg_locks would be exact; SKIP LOCKED probing is cheap).
WITH tasks AS (
    SELECT task FROM ONLY almanac.schedules
    UNION
    SELECT DISTINCT task FROM ONLY almanac.jobs
)
SELECT t.task,
       s.cron, s.zone, s.catch_up, s.generated_through, s.paused,
       count(j.*) FILTER (WHERE j.status = 'pending')                    AS pending,
       count(j.*) FILTER (WHERE j.status = 'done')                       AS done,
       count(j.*) FILTER (WHERE j.status = 'failed')                     AS failed,
       extract(epoch FROM now() - min(j.created_at) FILTER (WHERE j.status = 'pending'))::float8
                                                                         AS oldest_pending_s,
       (SELECT left(last_error, 4096) FROM ONLY almanac.jobs e
         WHERE e.task = t.task AND e.last_error IS NOT NULL AND e.status <> 'discarded'
         ORDER BY e.completed_at DESC NULLS LAST, e.run_after DESC LIMIT 1) AS last_error,
       count(j.*) FILTER (WHERE j.status = 'discarded')                  AS discarded
FROM tasks t
LEFT JOIN ONLY almanac.schedules s ON s.task = t.task
LEFT JOIN ONLY almanac.jobs j ON j.task = t.task
GROUP BY t.task, s.cron, s.zone, s.catch_up, s.generated_through, s.paused
ORDER BY t.task
