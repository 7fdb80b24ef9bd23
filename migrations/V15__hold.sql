-- `almanac hold TASK`: no job of the task starts on any host from the next claim on,
-- scheduled or on demand (`pause` stops only the generation of new slots); the jobs wait
-- pending, nothing is lost; jobs running at the hold finish. `almanac release` ends it.
-- The check is in the claim itself, so no host of any version that claims through these
-- functions can start a held task's job. Recorded in almanac.changes.
ALTER TABLE almanac.schedules ADD COLUMN held boolean NOT NULL DEFAULT false;

ALTER TABLE almanac.changes DROP CONSTRAINT changes_action_check;
ALTER TABLE almanac.changes ADD CONSTRAINT changes_action_check
    CHECK (action IN ('register', 'apply', 'cursor', 'pause', 'resume', 'forget', 'discard', 'hold', 'release')) NOT VALID;
ALTER TABLE almanac.changes VALIDATE CONSTRAINT changes_action_check;

-- As V12's, returning nothing for a held task, and nothing on a run of the server no
-- sweep has taken the orphans of yet (V14's almanac.swept).
CREATE OR REPLACE FUNCTION almanac_job.claim(batch integer, floor timestamptz, digest text)
RETURNS TABLE (task text, slot timestamptz, key text, attempts integer, payload text, crashes integer,
               last_error text, plugin_digest text, run_after timestamptz, period text, transients integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan SET jit = off
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
SET enable_bitmapscan = off SET enable_sort = off
AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
BEGIN
    IF EXISTS (SELECT 1 FROM ONLY almanac.schedules h WHERE h.task = mine AND h.held)
       OR (SELECT w.incarnation FROM almanac.swept w) IS DISTINCT FROM almanac.server_incarnation() THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.run_after
        FROM almanac.jobs j
        WHERE j.status = 'pending' AND j.run_after <= now() AND j.task = mine AND j.slot >= floor
        ORDER BY j.run_after, j.slot, j.task, j.key
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE almanac.jobs AS j
        SET status = 'done', attempts = due.attempts + 1, completed_at = now(), plugin_digest = digest, last_error = NULL
        FROM due
        WHERE j.task = due.task AND j.slot = due.slot AND j.key = due.key AND j.slot >= floor
        RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest,
                  due.run_after, j.period, j.transients
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, pending, done)
        SELECT c.task, date_trunc('month', c.slot, 'UTC'), -count(*), count(*) FROM claimed c GROUP BY 1, 2
    )
    SELECT * FROM claimed;
END $$;

CREATE OR REPLACE FUNCTION almanac_job.claim_one(at timestamptz, named text, digest text)
RETURNS TABLE (task text, slot timestamptz, key text, attempts integer, payload text, crashes integer,
               last_error text, plugin_digest text, run_after timestamptz, period text, transients integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
BEGIN
    IF EXISTS (SELECT 1 FROM ONLY almanac.schedules h WHERE h.task = mine AND h.held)
       OR (SELECT w.incarnation FROM almanac.swept w) IS DISTINCT FROM almanac.server_incarnation() THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.run_after
        FROM almanac.jobs j
        WHERE j.task = mine AND j.slot = at AND j.key = named AND j.status = 'pending'
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE almanac.jobs AS j
        SET status = 'done', attempts = due.attempts + 1, completed_at = now(), plugin_digest = digest, last_error = NULL
        FROM due
        WHERE j.task = due.task AND j.slot = due.slot AND j.key = due.key
        RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest,
                  due.run_after, j.period, j.transients
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, pending, done)
        SELECT c.task, date_trunc('month', c.slot, 'UTC'), -count(*), count(*) FROM claimed c GROUP BY 1, 2
    )
    SELECT * FROM claimed;
END $$;
