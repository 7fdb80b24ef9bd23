-- Per task, what the database says right now (the same from every host): pending jobs
-- and how long the oldest due one has waited (almanac.task_counts: the partial index
-- jobs_pending, not the history), and the scheduler's lag behind the calendar (now minus
-- the newest generated slot).
SELECT coalesce(s.task, c.task) AS task,
       coalesce(c.pending, 0)   AS pending,
       coalesce(extract(epoch FROM now() - c.oldest_due)::float8, 0) AS oldest_pending_s,
       -- An on-demand task (no cron) generates nothing: it has no lag.
       CASE WHEN s.cron IS NOT NULL THEN extract(epoch FROM now() - s.generated_through)::float8 END AS lag_s,
       -- `almanac hold`, or held for server crashes (migrations/V20__crash_charges.sql).
       coalesce(s.held, false) AS held,
       -- Periods within the backfill horizon whose plan returned no keys (V23).
       (SELECT count(*) FROM almanac.slots l
         WHERE l.task = s.task AND l.status = 'empty' AND l.generated_at > now() - s.horizon) AS empty_periods
FROM ONLY almanac.schedules s
FULL JOIN almanac.task_counts c ON c.task = s.task
ORDER BY 1
