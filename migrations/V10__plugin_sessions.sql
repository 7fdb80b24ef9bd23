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

-- Enqueue per task. `almanac_client` may enqueue into every task, as before; a role
-- given tasks one by one (`almanac clients allow ROLE TASK`: a row here, and membership
-- in `almanac_enqueuer`, which holds EXECUTE on the two functions and nothing else) may
-- enqueue into those alone, and a refusal names only the tasks the caller may use. The
-- caller is `session_user` (inside these functions `current_user` is their owner); a role
-- it has SET ROLE to is one it is a member of, which is what is checked.
CREATE TABLE almanac.enqueue_grants (
    grantee text NOT NULL,
    task    text NOT NULL,
    PRIMARY KEY (grantee, task)
);

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'almanac_enqueuer') THEN
        CREATE ROLE almanac_enqueuer NOLOGIN;
    END IF;
END $$;
GRANT USAGE ON SCHEMA almanac TO almanac_enqueuer;
GRANT EXECUTE ON FUNCTION almanac.enqueue(text, timestamptz, text, jsonb, timestamptz, boolean) TO almanac_enqueuer;
GRANT EXECUTE ON FUNCTION almanac.enqueue_many(text, timestamptz, text[], jsonb, boolean) TO almanac_enqueuer;

-- The tasks the caller may enqueue into, or NULL for all of them.
CREATE FUNCTION almanac.enqueue_tasks() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN pg_catalog.pg_has_role(session_user, 'almanac_client', 'MEMBER') THEN NULL
                ELSE coalesce((SELECT array_agg(DISTINCT g.task ORDER BY g.task) FROM almanac.enqueue_grants g
                               WHERE pg_catalog.pg_has_role(session_user, g.grantee, 'MEMBER')), '{}') END
$$;
REVOKE ALL ON FUNCTION almanac.enqueue_tasks() FROM PUBLIC;

-- The caller's right to the task, checked before anything else the enqueue functions do.
CREATE FUNCTION almanac.check_rights(task text) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text[] := almanac.enqueue_tasks();
BEGIN
    IF task IS NOT NULL AND mine IS NOT NULL AND NOT task = ANY(mine) THEN
        RAISE EXCEPTION 'almanac.enqueue: role % may not enqueue into task "%"', session_user, task
            USING ERRCODE = '42501',
                  HINT = 'tasks it may enqueue into: ' || coalesce(nullif(array_to_string(mine, ', '), ''), 'none')
                         || ' (an operator grants one with: almanac clients allow ROLE TASK)';
    END IF;
END $$;
REVOKE ALL ON FUNCTION almanac.check_rights(text) FROM PUBLIC;

-- The two enqueue functions of V7, the right checked first (their grants stay).
CREATE OR REPLACE FUNCTION almanac.enqueue(task text, slot timestamptz, key text, payload jsonb DEFAULT NULL,
                                           run_after timestamptz DEFAULT NULL, off_calendar boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM almanac.check_rights(enqueue.task);
    PERFORM almanac.check_enqueue(enqueue.task, enqueue.slot, coalesce(enqueue.off_calendar, false));
    PERFORM almanac.check_key(enqueue.key);
    INSERT INTO almanac.jobs (task, slot, key, payload, run_after)
    VALUES (enqueue.task, enqueue.slot, enqueue.key, enqueue.payload, greatest(coalesce(enqueue.run_after, now()), enqueue.slot))
    ON CONFLICT (task, slot, key) DO NOTHING;
    RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION almanac.enqueue_many(task text, slot timestamptz, keys text[], payload jsonb DEFAULT NULL,
                                                off_calendar boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    bad text;
    created integer;
BEGIN
    PERFORM almanac.check_rights(enqueue_many.task);
    PERFORM almanac.check_enqueue(enqueue_many.task, enqueue_many.slot, coalesce(enqueue_many.off_calendar, false));
    IF keys IS NULL THEN
        RAISE EXCEPTION 'almanac.enqueue_many: keys must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT k INTO bad FROM unnest(keys) k WHERE k IS NULL OR k = '' OR octet_length(k) > 1024 LIMIT 1;
    IF FOUND THEN
        PERFORM almanac.check_key(bad);
    END IF;
    INSERT INTO almanac.jobs (task, slot, key, payload, run_after)
    SELECT enqueue_many.task, enqueue_many.slot, k, enqueue_many.payload, greatest(now(), enqueue_many.slot)
    FROM unnest(keys) k
    ON CONFLICT (task, slot, key) DO NOTHING;
    GET DIAGNOSTICS created = ROW_COUNT;
    RETURN created;
END $$;
