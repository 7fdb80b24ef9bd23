-- A job that crashes the database server (a plugin statement that eats the server's
-- memory until the kernel kills its backend) is counted, and failed after the host's
-- --poison-after, instead of being retried as an interruption for ever.
--
-- PostgreSQL answers a backend's crash by restarting every session with the same
-- postmaster (crash recovery empties almanac.incarnation); a restart or a failover
-- brings another postmaster. So an orphaned claim made under the same postmaster but
-- another token was running when the server crashed: its jobs become suspects
-- (crashes >= 1), and suspects run one at a time across all hosts (the gate below).
-- A crash while a suspect runs alone is then its own: counted as a crash and an
-- attempt (host/src/executor/sweep_claims.sql).

-- The postmaster's start as a number, not as text: text follows the session's TimeZone,
-- and the sweep compares what two sessions wrote.
CREATE OR REPLACE FUNCTION almanac.server_incarnation() RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t uuid;
BEGIN
    SELECT token INTO t FROM almanac.incarnation;
    IF NOT FOUND THEN
        INSERT INTO almanac.incarnation DEFAULT VALUES ON CONFLICT (one) DO NOTHING;
        SELECT token INTO t FROM almanac.incarnation;
    END IF;
    RETURN t::text || ' ' || extract(epoch FROM pg_postmaster_start_time())::text;
END $$;

-- One row; a suspect's transaction holds it while the suspect runs.
CREATE TABLE almanac.suspect_gate (
    one boolean PRIMARY KEY DEFAULT true CHECK (one)
);
INSERT INTO almanac.suspect_gate DEFAULT VALUES;

-- The session's task's claimed job ($1 slot, $2 key), a suspect, may run now: true when
-- no other suspect runs anywhere (the gate stays held until the job's transaction
-- ends); else the claim is undone as almanac_job.unclaim does ($3, $4 as they were) and
-- the job waits a second.
CREATE FUNCTION almanac_job.alone(at timestamptz, named text, error text, digest text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text := almanac.session_task();
BEGIN
    PERFORM 1 FROM almanac.suspect_gate FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN true;
    END IF;
    WITH restored AS (
        UPDATE almanac.jobs j
        SET status = 'pending', attempts = j.attempts - 1, completed_at = NULL, last_error = error, plugin_digest = digest,
            run_after = now() + interval '1 second'
        WHERE j.task = mine AND j.slot = at AND j.key = named AND j.status = 'done'
        RETURNING j.task, j.slot
    )
    INSERT INTO almanac.job_counts (task, month, pending, done)
    SELECT r.task, date_trunc('month', r.slot, 'UTC'), 1, -1 FROM restored r;
    RETURN false;
END $$;

REVOKE ALL ON FUNCTION almanac_job.alone(timestamptz, text, text, text) FROM PUBLIC;
-- Hosts grant the plugins' roles EXECUTE again at start; here for the roles that exist.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'almanac\_task\_%' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION almanac_job.alone(timestamptz, text, text, text) TO %I', r.rolname);
    END LOOP;
END $$;

-- Held (FOR UPDATE, in a transaction of its own) while a plugin's setup runs anywhere:
-- no plugin can take it, as it could an advisory lock's well-known key.
CREATE TABLE almanac.setup_lock (
    one boolean PRIMARY KEY DEFAULT true CHECK (one)
);
INSERT INTO almanac.setup_lock DEFAULT VALUES;

-- The server run the last sweep took the orphans of. Until a sweep has run on this run
-- of the server, the claims claim nothing (V15): after a crash a host whose sessions
-- survived it (through a pooler, or idle) would claim the job that crashed the server
-- before any sweep marked it.
CREATE TABLE almanac.swept (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    incarnation text
);
INSERT INTO almanac.swept DEFAULT VALUES;
