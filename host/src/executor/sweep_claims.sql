-- Orphaned claims: rows whose connection is gone. Each is taken once (DELETE), and each
-- job it lists that is still pending with the attempts it had when claimed ended
-- without an outcome. Why tells what that was:
-- - the server went away under it (the claim was made on another run of the server: a
--   crash, a restart, a failover), or its host saw the database drop the connection
--   (`interrupted`): an interruption, counted on the job's own budget ($1 transients
--   before it fails) and never as a crash or an attempt;
-- - else its host (or the host's connection) ended: claimed alone, that is a crash and
--   a failed attempt; claimed in a batch, the job is marked (crashes >= 1) so it runs
--   alone from now on.
-- Each is recorded in the attempt history as what it was. A job another host is
-- running now is waited for, so nothing is lost.
WITH server AS (
    SELECT almanac.server_incarnation() AS incarnation
), orphaned AS (
    DELETE FROM ONLY almanac.claims c
    WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.pid AND a.backend_start = c.backend_start)
    RETURNING c.host, c.claimed_at, c.tasks, c.slots, c.keys, c.attempts,
              c.interrupted OR coalesce(c.incarnation <> (SELECT incarnation FROM server), false) AS interrupted
), listed AS (
    SELECT o.host, o.claimed_at, cardinality(o.keys) = 1 AS alone, o.interrupted, k.task, k.slot, k.key, k.attempts
    FROM orphaned o, unnest(o.tasks, o.slots, o.keys, o.attempts) AS k(task, slot, key, attempts)
), hit AS (
    UPDATE almanac.jobs j
    SET crashes = CASE WHEN l.interrupted THEN j.crashes WHEN l.alone THEN j.crashes + 1 ELSE greatest(j.crashes, 1) END,
        attempts = j.attempts + (l.alone AND NOT l.interrupted)::int,
        transients = j.transients + l.interrupted::int,
        status = CASE WHEN l.interrupted AND j.transients + 1 > $1 THEN 'failed' ELSE j.status END,
        completed_at = CASE WHEN l.interrupted AND j.transients + 1 > $1 THEN now() END,
        last_error = CASE
            WHEN l.interrupted THEN format('interrupted: the database server or the connection went away while the job ran (%s, claimed at %s)', l.host, l.claimed_at)
            WHEN l.alone THEN format('the host running it ended before the job did (%s, claimed at %s)', l.host, l.claimed_at)
            ELSE j.last_error END
    FROM listed l
    WHERE (j.task, j.slot, j.key) = (l.task, l.slot, l.key)
      AND j.status = 'pending' AND j.attempts = l.attempts
    RETURNING j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.status, l.alone, l.interrupted
), counted AS (
    INSERT INTO almanac.job_counts (task, month, pending, failed)
    SELECT h.task, date_trunc('month', h.slot, 'UTC'), -count(*), count(*) FROM hit h WHERE h.status = 'failed' GROUP BY 1, 2
), recorded AS (
    INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest, kind)
    SELECT task, slot, key, CASE WHEN interrupted THEN attempts + 1 ELSE attempts END, last_error, plugin_digest,
           CASE WHEN interrupted THEN 'transient' ELSE 'crash' END
    FROM hit WHERE alone OR interrupted
)
SELECT (SELECT count(*) FROM orphaned),
       count(*) FILTER (WHERE alone AND NOT interrupted),
       count(*) FILTER (WHERE NOT alone AND NOT interrupted),
       count(*) FILTER (WHERE interrupted)
FROM hit
