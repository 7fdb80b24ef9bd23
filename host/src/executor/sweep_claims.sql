-- Orphaned claims: rows whose connection is gone. Each is taken once (DELETE), and each
-- job it lists that is still pending with the attempts it had when claimed ended
-- without an outcome: claimed alone, that is a crash and a failed attempt, recorded in
-- the attempt history; claimed in a batch, it is marked (crashes >= 1) so it runs alone
-- from now on. A job another host is running now is waited for, so no crash is lost.
WITH orphaned AS (
    DELETE FROM ONLY almanac.claims c
    WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.pid AND a.backend_start = c.backend_start)
    RETURNING c.host, c.claimed_at, c.tasks, c.slots, c.keys, c.attempts
), listed AS (
    SELECT o.host, o.claimed_at, cardinality(o.keys) = 1 AS alone, k.task, k.slot, k.key, k.attempts
    FROM orphaned o, unnest(o.tasks, o.slots, o.keys, o.attempts) AS k(task, slot, key, attempts)
), hit AS (
    UPDATE almanac.jobs j
    SET crashes = CASE WHEN l.alone THEN j.crashes + 1 ELSE greatest(j.crashes, 1) END,
        attempts = j.attempts + l.alone::int,
        last_error = CASE WHEN l.alone
            THEN format('the host running it ended before the job did (%s, claimed at %s)', l.host, l.claimed_at)
            ELSE j.last_error END
    FROM listed l
    WHERE (j.task, j.slot, j.key) = (l.task, l.slot, l.key)
      AND j.status = 'pending' AND j.attempts = l.attempts
    RETURNING j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, l.alone
), recorded AS (
    INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest)
    SELECT task, slot, key, attempts, last_error, plugin_digest FROM hit WHERE alone
)
SELECT (SELECT count(*) FROM orphaned), count(*) FILTER (WHERE alone), count(*) FILTER (WHERE NOT alone) FROM hit
