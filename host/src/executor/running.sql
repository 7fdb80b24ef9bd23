-- Jobs a worker is running right now, per task: the jobs each live worker connection
-- recorded for its current batch (almanac.claims, written before the batch runs) that
-- are still pending with the attempts they were claimed with, as others see them. The
-- claim's done mark is not visible until the batch commits, and a job that finished
-- shows as done (or, failed, with one attempt more), so a batch already over counts
-- nothing. Reads a few rows per worker, never the job history. The reader sees a
-- session's backend_start only as a member of its role: the host is one of each plugin
-- login's (login.rs).
SELECT k.task, count(*)
FROM ONLY almanac.claims c
JOIN pg_stat_activity a ON a.pid = c.pid AND a.backend_start = c.backend_start
CROSS JOIN LATERAL unnest(c.tasks, c.slots, c.keys, c.attempts) AS k(task, slot, key, attempts)
JOIN almanac.jobs j ON (j.task, j.slot, j.key) = (k.task, k.slot, k.key)
WHERE j.status = 'pending' AND j.attempts = k.attempts
GROUP BY k.task
