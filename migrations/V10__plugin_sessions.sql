-- Confinement the database enforces. A plugin's statements run in a session whose
-- *session user* is the plugin's own login role (almanac_task_<task>), holding nothing
-- but the privileges its describe() declares: `SET ROLE`, `RESET ROLE`,
-- `set_config('role', ...)` or `SET SESSION AUTHORIZATION` reached by any trick land on
-- that same powerless role. The host's own bookkeeping inside the job's transaction
-- (claim and done mark, a failure's record, putting a job back, an outbox message) goes
-- through the SECURITY DEFINER functions of schema almanac_job below, which find the
-- caller's task from `session_user` and touch only that task's rows. Effect and done
-- mark still commit in one transaction, on one connection.

-- Each plugin's login: which task it is, and the password hosts connect with (made and
-- shared by the hosts; `almanac logins rotate` replaces it). Readable by the host's role
-- only, like every table of schema almanac.
CREATE TABLE almanac.plugin_logins (
    login      text PRIMARY KEY,
    task       text NOT NULL UNIQUE,
    password   text NOT NULL,
    rotated_at timestamptz NOT NULL DEFAULT now()
);

-- The task whose login this session is, or an error: no other session may use the
-- functions below (a host's own session, or an application's, owns no task).
CREATE FUNCTION almanac.session_task() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text;
BEGIN
    SELECT l.task INTO mine FROM almanac.plugin_logins l WHERE l.login = session_user::text;
    IF mine IS NULL THEN
        RAISE EXCEPTION 'almanac_job: session user % is no plugin''s login', session_user USING ERRCODE = '42501';
    END IF;
    RETURN mine;
END $$;
REVOKE ALL ON FUNCTION almanac.session_task() FROM PUBLIC;

CREATE SCHEMA almanac_job;
REVOKE ALL ON SCHEMA almanac_job FROM PUBLIC;

-- Claim up to `batch` due jobs of the session's task and mark them done (see
-- host/src/executor/claim.sql for the shape, which this is). The plan is generic and
-- forced: each month's pending index read in order and merged, a nested loop into the
-- partitions' primary keys, whatever the statistics say (a month just made and not yet
-- analyzed made the planner read partitions whole). jit = off: with the alternatives off
-- the estimates of anything else the call plans cross jit_above_cost, and compiling costs
-- 40 ms to save nothing.
CREATE FUNCTION almanac_job.claim(batch integer, floor timestamptz, digest text)
RETURNS TABLE (task text, slot timestamptz, key text, attempts integer, payload text, crashes integer,
               last_error text, plugin_digest text, run_after timestamptz)
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
        RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest, due.run_after
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, pending, done)
        SELECT c.task, date_trunc('month', c.slot, 'UTC'), -count(*), count(*) FROM claimed c GROUP BY 1, 2
    )
    SELECT * FROM claimed;
END $$;

-- One named job of the session's task, if still pending and free (a job a crash marked
-- runs in a transaction of its own).
CREATE FUNCTION almanac_job.claim_one(at timestamptz, named text, digest text)
RETURNS TABLE (task text, slot timestamptz, key text, attempts integer, payload text, crashes integer,
               last_error text, plugin_digest text, run_after timestamptz)
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
        RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest, due.run_after
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, pending, done)
        SELECT c.task, date_trunc('month', c.slot, 'UTC'), -count(*), count(*) FROM claimed c GROUP BY 1, 2
    )
    SELECT * FROM claimed;
END $$;

-- A claimed job of the session's task not run after all: pending again, as it was.
CREATE FUNCTION almanac_job.unclaim(at timestamptz, named text, error text, digest text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text := almanac.session_task();
BEGIN
    WITH restored AS (
        UPDATE almanac.jobs j
        SET status = 'pending', attempts = j.attempts - 1, completed_at = NULL, last_error = error, plugin_digest = digest
        WHERE j.task = mine AND j.slot = at AND j.key = named AND j.status = 'done'
        RETURNING j.task, j.slot
    )
    INSERT INTO almanac.job_counts (task, month, pending, done)
    SELECT r.task, date_trunc('month', r.slot, 'UTC'), 1, -1 FROM restored r;
END $$;

-- A failed attempt of the session's task's job, recorded over the claim's done mark
-- after the job's savepoint rolled back (host/src/executor/mark_failed.sql's shape).
CREATE FUNCTION almanac_job.fail(at timestamptz, named text, error text, give_up boolean, delay double precision, digest text)
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
    INSERT INTO almanac.attempts (task, slot, key, attempt, error, plugin_digest)
    SELECT f.task, f.slot, f.key, f.attempts, f.last_error, f.plugin_digest FROM failed f;
END $$;

-- Who may publish on each outbox topic: the tasks `almanac.toml` names
-- (`[outbox.topics.<topic>] publishers = [...]`, written by hosts at start: `configured`),
-- else the first task that published on it. A topic belonged to nobody, and a plugin
-- published on another's topic with its future key: the receiver got the forgery under
-- the real Idempotency-Key, and the real message was dropped as already published.
CREATE TABLE almanac.outbox_topics (
    topic      text PRIMARY KEY,
    publishers text[] NOT NULL,
    configured boolean NOT NULL DEFAULT false
);
-- Topics already in use belong to the tasks that used them.
INSERT INTO almanac.outbox_topics (topic, publishers)
SELECT topic, array_agg(DISTINCT task ORDER BY task) FROM ONLY almanac.outbox WHERE task IS NOT NULL GROUP BY topic;

-- One outbox message in the job's transaction, recorded as the session's task's, on a
-- topic that task may publish on. A second publish of the same (topic, key) inserts
-- nothing: returns 0.
CREATE FUNCTION almanac_job.publish(topic text, key text, payload bytea, content_type text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
    n integer;
    allowed text[];
BEGIN
    -- The host checks these before it calls; a plugin that reached this function some
    -- other way gets the same bounds (host/src/outbox/message.rs).
    IF publish.topic !~ '^[a-z0-9._-]{1,200}$' OR octet_length(publish.key) NOT BETWEEN 1 AND 1000
       OR octet_length(publish.payload) > 1048576 OR publish.content_type !~ '^[ -~]{1,200}$' THEN
        RAISE EXCEPTION 'refused: an outbox message outside its bounds (topic, key, payload of at most 1 MiB, content type)' USING ERRCODE = '22023';
    END IF;
    -- The first publisher claims an unclaimed topic; a second racing for it waits on the
    -- key and then reads the winner's claim.
    INSERT INTO almanac.outbox_topics AS t (topic, publishers) VALUES (publish.topic, ARRAY[mine]) ON CONFLICT (topic) DO NOTHING;
    SELECT t.publishers INTO allowed FROM almanac.outbox_topics t WHERE t.topic = publish.topic;
    IF NOT mine = ANY(allowed) THEN
        RAISE EXCEPTION 'refused: task % may not publish on outbox topic % (its publishers: %)', mine, publish.topic, array_to_string(allowed, ', ')
            USING ERRCODE = '42501', HINT = 'name the task in [outbox.topics.' || publish.topic || '] publishers in almanac.toml';
    END IF;
    INSERT INTO almanac.outbox (topic, key, payload, content_type, task)
    VALUES (publish.topic, publish.key, publish.payload, publish.content_type, mine)
    ON CONFLICT (topic, key) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA almanac_job FROM PUBLIC;

-- The claim floor counts only jobs that can become due: a pending job far in the future
-- (one client row with slot year 1 and run_after year 9999) no longer pins every claim's
-- plan to every partition. A job whose run_after comes within the next minute counts,
-- and hosts ask again every few seconds, so none waits past its time for the floor.
-- And an empty default partition no longer sets the floor to year 1: V9's
-- `greatest(min(slot), ...)` of no rows was year 1 (greatest skips NULLs), so every
-- claim named every partition.
CREATE OR REPLACE FUNCTION almanac.claim_floor() RETURNS timestamptz
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    floor timestamptz := date_trunc('month', now(), 'UTC') - interval '1 month';
    soon timestamptz := now() + interval '1 minute';
    p record;
    pending boolean;
BEGIN
    floor := least(floor, (SELECT date_trunc('month', greatest(min(d.slot), '0001-01-01 00:00:00+00'), 'UTC')
                           FROM almanac.jobs_default d WHERE d.status = 'pending' AND d.run_after <= soon
                           HAVING count(*) > 0));
    FOR p IN SELECT j.partition, j.first FROM almanac.job_partitions j WHERE j.first < floor ORDER BY j.first LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE status = ''pending'' AND run_after <= $1)', p.partition) INTO pending USING soon;
        IF pending THEN
            RETURN p.first;
        END IF;
    END LOOP;
    RETURN floor;
END $$;
