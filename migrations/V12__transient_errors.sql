-- Transient errors: a deadlock (40P01), a serialization failure (40001), an admin
-- shutdown, a server restart or a failover (57P01, 57P02, 57P03, class 08, a lost
-- connection) says nothing about the job. Such an attempt is retried on a budget of its
-- own (`transients`), recorded in the attempt history as what it was, and never counted
-- against the task's max_attempts; a server that went away under a job is not one of
-- the job's crashes either (the poison count is for hosts the job took down).

-- Interruptions by the database, per job; `attempts` counts only the job's own.
ALTER TABLE almanac.jobs ADD COLUMN transients integer NOT NULL DEFAULT 0;

-- What each recorded attempt was: the job's own error, a transient interruption, or a
-- crash of the host running it (the sweep's). Rows from before say 'error'.
ALTER TABLE almanac.attempts ADD COLUMN kind text NOT NULL DEFAULT 'error'
    CHECK (kind IN ('error', 'transient', 'crash'));

-- Which run of the server a claim was made on. An unlogged table is emptied by crash
-- recovery and is empty on a standby promoted to primary, so its token changes with
-- every crash and failover; a clean restart keeps it, and the postmaster's start time
-- tells that one (which a crash restart keeps).
CREATE UNLOGGED TABLE almanac.incarnation (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    token uuid    NOT NULL DEFAULT gen_random_uuid()
);

CREATE FUNCTION almanac.server_incarnation() RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t uuid;
BEGIN
    SELECT token INTO t FROM almanac.incarnation;
    IF NOT FOUND THEN
        INSERT INTO almanac.incarnation DEFAULT VALUES ON CONFLICT (one) DO NOTHING;
        SELECT token INTO t FROM almanac.incarnation;
    END IF;
    RETURN t::text || ' ' || pg_postmaster_start_time()::text;
END $$;

-- A claim made before this migration has no incarnation: its orphan counts as before.
ALTER TABLE almanac.claims ADD COLUMN incarnation text;
-- Set by the host whose connection the database dropped (57P01, class 08): its orphan is
-- an interruption, not a crash.
ALTER TABLE almanac.claims ADD COLUMN interrupted boolean NOT NULL DEFAULT false;

-- A transient failure, in the job's own transaction after rolling back to its savepoint:
-- the claim's attempt is given back and the interruption counted; the job is pending
-- again after `delay` seconds, or failed when `give_up` (the host's budget is spent).
CREATE FUNCTION almanac_job.interrupted(at timestamptz, named text, error text, give_up boolean, delay double precision, digest text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text := almanac.session_task();
BEGIN
    WITH hit AS (
        UPDATE almanac.jobs j
        SET last_error = error,
            status = CASE WHEN give_up THEN 'failed' ELSE 'pending' END,
            completed_at = CASE WHEN give_up THEN now() END,
            run_after = now() + make_interval(secs => delay),
            attempts = j.attempts - 1,
            transients = j.transients + 1,
            plugin_digest = digest
        WHERE j.task = mine AND j.slot = at AND j.key = named AND j.status = 'done'
        RETURNING j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.status
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, done, pending, failed)
        SELECT h.task, date_trunc('month', h.slot, 'UTC'), -1, (h.status = 'pending')::int, (h.status = 'failed')::int FROM hit h
    )
    -- Recorded under the attempt it interrupted (the next one has the same number).
    INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest, kind)
    SELECT h.task, h.slot, h.key, h.attempts + 1, h.last_error, h.plugin_digest, 'transient' FROM hit h;
END $$;

-- The claims return each job's interruptions too: the host sizes their backoff and
-- budget from them.
DROP FUNCTION almanac_job.claim(integer, timestamptz, text);
DROP FUNCTION almanac_job.claim_one(timestamptz, text, text);

CREATE FUNCTION almanac_job.claim(batch integer, floor timestamptz, digest text)
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

CREATE FUNCTION almanac_job.claim_one(at timestamptz, named text, digest text)
RETURNS TABLE (task text, slot timestamptz, key text, attempts integer, payload text, crashes integer,
               last_error text, plugin_digest text, run_after timestamptz, period text, transients integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
BEGIN
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

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA almanac_job FROM PUBLIC;
-- Hosts grant the plugins' roles EXECUTE again at start; here for the roles that exist.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'almanac\_task\_%' LOOP
        EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA almanac_job TO %I', r.rolname);
    END LOOP;
END $$;
