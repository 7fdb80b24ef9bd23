-- Per task, what the database says right now (the same from every host): pending jobs
-- and the age of the oldest (read through the partial index jobs_pending), and the
-- scheduler's lag behind the calendar (now minus the newest generated slot).
WITH pending AS (
    SELECT task, count(*) AS pending,
           extract(epoch FROM now() - min(created_at))::float8 AS oldest_s
    FROM ONLY almanac.jobs
    WHERE status = 'pending'
    GROUP BY task
)
SELECT coalesce(s.task, p.task) AS task,
       coalesce(p.pending, 0)   AS pending,
       coalesce(p.oldest_s, 0)  AS oldest_pending_s,
       -- An on-demand task (no cron) generates nothing: it has no lag.
       CASE WHEN s.cron IS NOT NULL THEN extract(epoch FROM now() - s.generated_through)::float8 END AS lag_s
FROM ONLY almanac.schedules s
FULL JOIN pending p ON p.task = s.task
ORDER BY 1
