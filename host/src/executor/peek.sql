-- When each task served here ($1) next has a job to claim: seconds from now to its
-- earliest pending job's run_after (<= 0: due now); a held task and a task with nothing
-- pending are not listed. What an idle host asks instead of claiming, so it can sleep
-- until then (a retry's backoff, a slot still to come) or a notification. Not from the
-- claim floor: a job below it (an old period's retry) comes due too, and the floor
-- follows it once it does.
-- A day at most, whatever run_after says ('infinity' included).
SELECT t.task,
       CASE WHEN n.run_after <= now() THEN 0
            ELSE extract(epoch FROM least(n.run_after, now() + interval '1 day') - now())::float8 END
FROM unnest($1::text[]) AS t(task)
CROSS JOIN LATERAL (
    SELECT j.run_after FROM almanac.jobs j
    WHERE j.status = 'pending' AND j.task = t.task
    ORDER BY j.run_after
    LIMIT 1
) n
WHERE NOT EXISTS (SELECT 1 FROM ONLY almanac.schedules s WHERE s.task = t.task AND s.held)
