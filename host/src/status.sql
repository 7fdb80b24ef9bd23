-- Per task: its schedule (if any) and its job counts (almanac.task_counts: read from
-- partial indexes and counters, never from the history). The last error is that of the
-- task's newest failed attempt among its latest 100 whose job has not succeeded since.
SELECT t.task,
       s.cron, s.zone, s.catch_up, s.generated_through, s.paused,
       coalesce(c.pending, 0), coalesce(c.done, 0), coalesce(c.failed, 0),
       extract(epoch FROM now() - c.oldest_due)::float8 AS oldest_pending_s,
       (SELECT left(a.error, 4096)
          FROM (SELECT * FROM almanac.attempts r WHERE r.task = t.task ORDER BY r.id DESC LIMIT 100) a
          JOIN almanac.jobs j ON (j.task, j.slot, j.key) = (a.task, a.slot, a.key) AND j.status IN ('pending', 'failed')
         ORDER BY a.id DESC LIMIT 1) AS last_error,
       coalesce(c.discarded, 0),
       -- Periods generated before the latest applied change of cron, zone, period or
       -- business calendar: they ran at an older calendar's instant, and stay done under it
       -- (identity is by period).
       (SELECT count(*) FROM almanac.slots l
         WHERE l.task = t.task AND l.status IN ('generated', 'empty')
           AND l.revision < (SELECT max(ch.revision) FROM almanac.changes ch
                              WHERE ch.task = t.task AND ch.action = 'apply'
                                AND (ch.before->>'cron', ch.before->>'zone', ch.before->>'period', ch.before->>'business')
                                    IS DISTINCT FROM (ch.after->>'cron', ch.after->>'zone', ch.after->>'period', ch.after->>'business'))),
       s.held,
       s.held_reason,
       s.business,
       -- Periods planned within the backfill horizon whose plan returned no keys (V23),
       -- and the newest of them.
       (SELECT count(*) FROM almanac.slots l
         WHERE l.task = t.task AND l.status = 'empty' AND l.generated_at > now() - s.horizon),
       (SELECT max(l.period) FROM almanac.slots l
         WHERE l.task = t.task AND l.status = 'empty' AND l.generated_at > now() - s.horizon),
       coalesce(s.expect_jobs, false),
       extract(epoch FROM s.horizon)::float8
FROM (SELECT task FROM ONLY almanac.schedules UNION SELECT task FROM almanac.task_counts) t
LEFT JOIN ONLY almanac.schedules s ON s.task = t.task
LEFT JOIN almanac.task_counts c ON c.task = t.task
ORDER BY t.task
