-- Which host made each attempt, for the job's page and `almanac jobs --attempts`. The host
-- recording a failure or an interruption names itself: almanac_job.fail and
-- almanac_job.interrupted take it as a last argument. (Reading it from the backend's
-- claim was tried: under REPEATABLE READ the job's snapshot predates the claim's commit,
-- so through a pooler it named the previous client's host.) The sweep names the swept
-- claim's host. Attempts recorded before this migration, or by hosts of an older version
-- calling the six-argument functions during a rolling upgrade, have none. A plugin can
-- call these functions in its own session, as it could before: it can mislabel only its
-- own task's attempts.
ALTER TABLE almanac.attempts ADD COLUMN host text;

-- V10's, and the host.
CREATE FUNCTION almanac_job.fail(at timestamptz, named text, error text, give_up boolean, delay double precision, digest text, host text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text := almanac.session_task();
BEGIN
    WITH failed AS (
        UPDATE almanac.jobs j
        SET last_error = error,
            status = CASE WHEN give_up THEN 'failed' ELSE 'pending' END,
            completed_at = CASE WHEN give_up THEN now() END,
            run_after = now() + make_interval(secs => delay),
            plugin_digest = digest
        -- Only the claim's done mark is failed over: a discarded or failed job stays so.
        WHERE j.task = mine AND j.slot = at AND j.key = named AND j.status = 'done'
        RETURNING j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.status
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, done, pending, failed)
        SELECT f.task, date_trunc('month', f.slot, 'UTC'), -1, (f.status = 'pending')::int, (f.status = 'failed')::int FROM failed f
    )
    INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest, host)
    SELECT f.task, f.slot, f.key, f.attempts, f.last_error, f.plugin_digest, host FROM failed f;
END $$;

CREATE OR REPLACE FUNCTION almanac_job.fail(at timestamptz, named text, error text, give_up boolean, delay double precision, digest text)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT almanac_job.fail(at, named, error, give_up, delay, digest, NULL)
$$;

-- V12's, and the host.
CREATE FUNCTION almanac_job.interrupted(at timestamptz, named text, error text, give_up boolean, delay double precision, digest text, host text)
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
    INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest, kind, host)
    SELECT h.task, h.slot, h.key, h.attempts + 1, h.last_error, h.plugin_digest, 'transient', host FROM hit h;
END $$;

CREATE OR REPLACE FUNCTION almanac_job.interrupted(at timestamptz, named text, error text, give_up boolean, delay double precision, digest text)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT almanac_job.interrupted(at, named, error, give_up, delay, digest, NULL)
$$;

-- Hosts grant the plugins' roles EXECUTE on every function of almanac_job at each load
-- (host/src/access.rs), before their sessions call these.
REVOKE ALL ON FUNCTION almanac_job.fail(timestamptz, text, text, boolean, double precision, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION almanac_job.interrupted(timestamptz, text, text, boolean, double precision, text, text) FROM PUBLIC;
