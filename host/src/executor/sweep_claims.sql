-- Orphaned claims: rows whose connection is gone. Each is taken once (DELETE), and each
-- job it lists that is still pending with the attempts it had when claimed ended
-- without an outcome. Why tells what that was (almanac.server_incarnation() is a token
-- crash recovery empties, then the postmaster's start):
-- - `restart`: made on another postmaster (a restart, a failover), or its host saw the
--   database drop the connection, or cancel one of the batch's own statements, while
--   the server ran on (`interrupted`, executor/transient.rs): an interruption,
--   counted on the job's own budget ($1 transients before it fails) and never as a
--   crash or an attempt;
-- - `server`: the same postmaster, another token: the server crashed (a backend died,
--   and PostgreSQL restarted every session). A suspect (crashes >= 1) runs alone
--   across all hosts (almanac_job.alone), so a crash under it is its own: a crash and
--   a failed attempt; any other job is marked (crashes >= 1) to run alone from now on;
-- - `host`: its host (or the host's connection) ended: claimed alone, that is a crash
--   and a failed attempt; claimed in a batch, the job is marked to run alone.
-- Each is recorded in the attempt history as what it was. A job another host is
-- running now is waited for, so nothing is lost.
WITH server AS (
    SELECT i AS incarnation, substr(i, strpos(i, ' ') + 1) AS postmaster FROM almanac.server_incarnation() i
), orphaned AS (
    DELETE FROM ONLY almanac.claims c
    WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.pid AND a.backend_start = c.backend_start)
      -- Batches the sweeping host has not settled yet ($2 pids, $3 starts) wait for its
      -- worker to say what their end was (claims.rs, Hold), unless the server restarted
      -- since they were claimed: then what the worker says changes nothing, and a job
      -- that crashed the server must be marked before anyone claims it again.
      AND NOT ((c.incarnation IS NULL OR c.incarnation = (SELECT incarnation FROM server))
               AND (c.pid, c.backend_start) IN (SELECT * FROM unnest($2::int[], $3::timestamptz[])))
    RETURNING c.host, c.claimed_at, c.tasks, c.slots, c.keys, c.attempts,
              CASE WHEN c.incarnation IS NOT NULL AND substr(c.incarnation, strpos(c.incarnation, ' ') + 1) <> (SELECT postmaster FROM server) THEN 'restart'
                   WHEN c.incarnation IS NOT NULL AND c.incarnation <> (SELECT incarnation FROM server) THEN 'server'
                   WHEN c.interrupted THEN 'restart'
                   ELSE 'host' END AS why
), crashed AS (
    -- The claims a server crash ended while their batches ran, and which of them was a
    -- suspect running alone. A claim row outlives its batch (the next batch on the
    -- connection overwrites it): one whose jobs are no longer pending with the attempts
    -- it claimed had committed, and ran nothing when the server went down. Counted, a
    -- marked innocent done alone long before the crash passed for a suspect, and its
    -- task was charged and held beside the bomb's (tests/e2e/server_crash.rs, once in CI).
    SELECT o.tasks,
           cardinality(o.keys) = 1 AND EXISTS (SELECT 1 FROM almanac.jobs j
                                               WHERE (j.task, j.slot, j.key) = (o.tasks[1], o.slots[1], o.keys[1])
                                                 AND j.status = 'pending' AND j.attempts = o.attempts[1] AND j.crashes >= 1) AS suspect
    FROM orphaned o
    WHERE o.why = 'server'
      AND EXISTS (SELECT 1 FROM unnest(o.tasks, o.slots, o.keys, o.attempts) AS k(task, slot, key, attempts)
                  JOIN almanac.jobs j ON (j.task, j.slot, j.key) = (k.task, k.slot, k.key)
                  WHERE j.status = 'pending' AND j.attempts = k.attempts)
), charged AS (
    -- A server crash is charged to the tasks that had jobs running when it happened
    -- (migrations/V20__crash_charges.sql), once per task per crash: to a suspect's alone
    -- when one ran (the crash is its own, as its job's count says), else to every one.
    INSERT INTO almanac.task_crashes (task, incarnation)
    SELECT DISTINCT t.task, (SELECT incarnation FROM server)
    FROM crashed c, unnest(c.tasks) AS t(task)
    WHERE c.suspect OR NOT EXISTS (SELECT 1 FROM crashed s WHERE s.suspect)
    ON CONFLICT DO NOTHING
    RETURNING task
), held AS (
    -- Charged $4 times within $5 (this charge included): held, as `almanac hold` does.
    UPDATE ONLY almanac.schedules s
    SET held = true, updated_at = now(),
        held_reason = format('held automatically: %s server crashes while its jobs ran, within %s (--poison-after, --poison-window); '
                             'fix the plugin or the server''s memory, then `almanac release %s`', $4::int, $5::text, s.task)
    WHERE s.task IN (SELECT task FROM charged) AND NOT s.held
      AND 1 + (SELECT count(*) FROM almanac.task_crashes c WHERE c.task = s.task AND c.at > now() - $5::text::interval) >= $4::int
    RETURNING s.task, s.revision, s.held_reason
), held_recorded AS (
    INSERT INTO almanac.changes (task, revision, action, before, after, origin, reason)
    SELECT task, revision, 'hold', 'false', 'true', 'almanac (server crashes)', held_reason FROM held
), listed AS (
    SELECT o.host, o.claimed_at, cardinality(o.keys) = 1 AS alone, o.why, k.task, k.slot, k.key, k.attempts
    FROM orphaned o, unnest(o.tasks, o.slots, o.keys, o.attempts) AS k(task, slot, key, attempts)
), judged AS (
    -- counted: a crash and a failed attempt; interrupted: on the transient budget;
    -- else the job is only marked to run alone.
    SELECT l.*, j.crashes, j.transients,
           (l.why = 'host' AND l.alone) OR (l.why = 'server' AND j.crashes >= 1) AS counted,
           l.why = 'restart' AS interrupted
    FROM listed l JOIN almanac.jobs j ON (j.task, j.slot, j.key) = (l.task, l.slot, l.key)
    WHERE j.status = 'pending' AND j.attempts = l.attempts
), hit AS (
    UPDATE almanac.jobs j
    SET crashes = CASE WHEN l.interrupted THEN j.crashes WHEN l.counted THEN j.crashes + 1 ELSE greatest(j.crashes, 1) END,
        attempts = j.attempts + l.counted::int,
        transients = j.transients + l.interrupted::int,
        status = CASE WHEN l.interrupted AND j.transients + 1 > $1 THEN 'failed' ELSE j.status END,
        completed_at = CASE WHEN l.interrupted AND j.transients + 1 > $1 THEN now() END,
        last_error = CASE
            WHEN l.interrupted THEN format('interrupted: the database ended the batch while the job ran (a restart, a failover, a dropped connection, a late cancel; %s, claimed at %s)', l.host, l.claimed_at)
            WHEN l.why = 'server' AND l.counted THEN format('the database server crashed while the job ran alone (%s, claimed at %s)', l.host, l.claimed_at)
            WHEN l.why = 'server' THEN format('the database server crashed while the job ran (%s, claimed at %s); it runs alone from now on', l.host, l.claimed_at)
            WHEN l.counted THEN format('the host running it ended before the job did (%s, claimed at %s)', l.host, l.claimed_at)
            ELSE j.last_error END
    FROM judged l
    WHERE (j.task, j.slot, j.key) = (l.task, l.slot, l.key)
      AND j.status = 'pending' AND j.attempts = l.attempts
    RETURNING j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.status, l.counted, l.interrupted, l.host
), counted AS (
    INSERT INTO almanac.job_counts (task, month, pending, failed)
    SELECT h.task, date_trunc('month', h.slot, 'UTC'), -count(*), count(*) FROM hit h WHERE h.status = 'failed' GROUP BY 1, 2
), noted AS (
    -- Claims may go on (migrations/V14__server_crashes.sql). Written every sweep, even
    -- when it does not change: the row lock makes the hosts' sweeps take turns. Written
    -- only on a change, two hosts swept side by side, and an innocent task was charged
    -- with the crashes its neighbour's suspect caused, and held
    -- (tests/e2e/server_crash.rs, 2 runs in 3).
    UPDATE almanac.swept SET incarnation = (SELECT incarnation FROM server)
), recorded AS (
    -- Under the swept claim's host, which ran the jobs (V31), not the sweeping one.
    INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest, kind, host)
    SELECT task, slot, key, CASE WHEN interrupted THEN attempts + 1 ELSE attempts END, last_error, plugin_digest,
           CASE WHEN interrupted THEN 'transient' ELSE 'crash' END, host
    FROM hit WHERE counted OR interrupted
)
SELECT (SELECT count(*) FROM orphaned),
       count(*) FILTER (WHERE counted),
       count(*) FILTER (WHERE NOT counted AND NOT interrupted),
       count(*) FILTER (WHERE interrupted),
       statement_timestamp(),
       (SELECT array_agg(task) FROM held)
FROM hit
