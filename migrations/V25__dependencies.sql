-- Dependencies between scheduled tasks of one period (`after = ["usage-rollup"]` in
-- almanac.toml, applied like the cron): a job of the task is claimable only once each
-- task it comes after has settled the same period: its scheduler has handled the period
-- (generated, empty, or skipped by its policy; jobs merely enqueued into a period before
-- it was generated do not count) and none of that period's jobs is pending or failed. A failed roll-up holds the invoices back until it is retried and
-- done, or discarded. The check is in the claim, as the hold's is: no host of any version
-- that claims through these functions starts a job early. Checked through the ledger's
-- slot and the jobs' primary key, so a task without dependencies pays one column read.
ALTER TABLE almanac.schedules ADD COLUMN after text[] NOT NULL DEFAULT '{}';

CREATE FUNCTION almanac.settled(tasks text[], period text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT NOT EXISTS (
        SELECT 1
        FROM unnest(tasks) AS d(task)
        LEFT JOIN almanac.slots l ON l.task = d.task AND l.period = settled.period AND l.status IN ('generated', 'empty', 'skipped')
        WHERE l.task IS NULL
           OR EXISTS (SELECT 1 FROM almanac.jobs x WHERE x.task = l.task AND x.slot = l.slot AND x.status IN ('pending', 'failed')))
$$;
REVOKE ALL ON FUNCTION almanac.settled(text[], text) FROM PUBLIC;

-- As V15's, and a job waits for the tasks its task comes after (almanac.settled).
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
    held boolean;
    deps text[];
BEGIN
    SELECT h.held, h.after INTO held, deps FROM ONLY almanac.schedules h WHERE h.task = mine;
    IF coalesce(held, false)
       OR (SELECT w.incarnation FROM almanac.swept w) IS DISTINCT FROM almanac.server_incarnation() THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.run_after
        FROM almanac.jobs j
        WHERE j.status = 'pending' AND j.run_after <= now() AND j.task = mine AND j.slot >= floor
          AND (deps = '{}' OR almanac.settled(deps, j.period))
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
    held boolean;
    deps text[];
BEGIN
    SELECT h.held, h.after INTO held, deps FROM ONLY almanac.schedules h WHERE h.task = mine;
    IF coalesce(held, false)
       OR (SELECT w.incarnation FROM almanac.swept w) IS DISTINCT FROM almanac.server_incarnation() THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.run_after
        FROM almanac.jobs j
        WHERE j.task = mine AND j.slot = at AND j.key = named AND j.status = 'pending'
          AND (deps = '{}' OR almanac.settled(deps, j.period))
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
