-- Claim up to {batch} due jobs of the tasks this host has loaded ($1, with their plugins'
-- digests $2), and mark them done in the same statement: the mark commits only with the
-- jobs' work, as one transaction, and a job that fails rolls back to its savepoint and
-- records its attempt over the mark (mark_failed.sql). The scan reads only the partial
-- index on pending rows (one per month partition, merged in order); rows another host
-- has locked are skipped, not waited for. Returns the row as it was (attempts before this
-- one, the last error). The counts (almanac.job_counts) move the batch's jobs from
-- pending to done in the same statement, so they commit or roll back with them.
--
-- {batch} is the host's batch size, written in as a literal: with `LIMIT $n` PostgreSQL
-- plans the statement anew on every execution (0.1-0.2 ms, once per job at --batch 1);
-- with a literal it settles on one generic plan. {floor} is where the host's claims look
-- from (almanac.claim_floor(), asked every few seconds), also a literal: the plan then
-- names only the partitions from that month on (and the default), and a generic plan
-- locks every partition it names on every execution.
WITH due AS (
    SELECT task, slot, key, attempts, last_error, plugin_digest, run_after
    FROM almanac.jobs
    WHERE status = 'pending'
      AND run_after <= now()
      AND task = ANY($1::text[])
      AND slot >= '{floor}'
    ORDER BY run_after, slot, task, key
    LIMIT {batch}
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE almanac.jobs AS j
    SET status = 'done', attempts = due.attempts + 1, completed_at = now(),
        plugin_digest = ($2::text[])[array_position($1::text[], due.task)], last_error = NULL
    FROM due
    WHERE j.task = due.task AND j.slot = due.slot AND j.key = due.key AND j.slot >= '{floor}'
    RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest, due.run_after
), counted AS (
    INSERT INTO almanac.job_counts (task, month, pending, done)
    SELECT task, date_trunc('month', slot, 'UTC'), -count(*), count(*) FROM claimed GROUP BY 1, 2
)
SELECT * FROM claimed
