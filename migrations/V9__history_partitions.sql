-- A year of history: `almanac.jobs` becomes a table partitioned by month of `slot` (UTC),
-- so the done rows kept as dedupe evidence are dropped a month at a time by `almanac
-- prune` (DROP TABLE, no row-by-row DELETE, no dead tuples), and a claim reads the
-- small partial index of each month instead of one index grown over years.
--
-- Why a month: a backfill horizon is days to months, so a prune a month late keeps at
-- most one month more than it must; a year is 12 partitions plus the default, which the
-- claim's Merge Append reads with negligible planning and startup cost. (Daily partitions
-- would mean ~400 partitions for a year's horizon: slower planning on every statement.)
--
-- The primary key (task, slot, key) contains the partition key, so it stays the dedupe
-- constraint across all partitions. No table can inherit from a partitioned table, so the
-- `ONLY` the host's statements used against planted child tables is no longer needed
-- for jobs (and would read nothing: a partitioned table holds no rows of its own).
--
-- The upgrade copies every row once, in this migration's transaction (about 100,000 rows
-- a second here); the old table is dropped at the end.

ALTER TABLE almanac.jobs RENAME TO jobs_v8;
ALTER INDEX almanac.jobs_pkey RENAME TO jobs_v8_pkey;
ALTER INDEX almanac.jobs_pending RENAME TO jobs_v8_pending;
ALTER INDEX almanac.jobs_failed RENAME TO jobs_v8_failed;

CREATE TABLE almanac.jobs (
    task          text        NOT NULL,
    slot          timestamptz NOT NULL,
    key           text        NOT NULL,
    status        text        NOT NULL DEFAULT 'pending'
                              CONSTRAINT jobs_status_check CHECK (status IN ('pending', 'done', 'failed', 'discarded')),
    attempts      integer     NOT NULL DEFAULT 0,
    run_after     timestamptz NOT NULL DEFAULT now(),
    payload       jsonb,
    last_error    text,
    plugin_digest text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz,
    retries       integer     NOT NULL DEFAULT 0,
    crashes       integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (task, slot, key)
) PARTITION BY RANGE (slot);

-- Every partition gets these (declared once, here).
CREATE INDEX jobs_pending ON almanac.jobs (run_after, slot, task, key) WHERE status = 'pending';
CREATE INDEX jobs_failed ON almanac.jobs (task, completed_at DESC) WHERE status = 'failed';
-- `status` counts discarded jobs from this, not from the history.
CREATE INDEX jobs_discarded ON almanac.jobs (task) WHERE status = 'discarded';

-- Slots outside every month partition (far in the past or future) land here, so an
-- insert never fails for a missing partition; `almanac status` reports what it holds,
-- and almanac.add_job_partition moves a month's rows out when it creates that month.
CREATE TABLE almanac.jobs_default PARTITION OF almanac.jobs DEFAULT;

-- Autovacuum, per partition (a partitioned table has no storage parameters of its own):
-- a claim turns a pending row into a done one, so the month being worked on gains one
-- dead tuple per job, and dead entries in the pending index are what a claim walks over.
-- PostgreSQL's default (vacuum at 20 % dead) would let a 40M-row month gather 8M dead
-- tuples first; these vacuum every 10,000 + 1 % of the rows. Inserts trigger a vacuum too
-- (5 %), which sets the visibility map that the counts' index-only scans rely on.
CREATE FUNCTION almanac.job_partition_options() RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 10000, '
        || 'autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02'
$$;

DO $$ BEGIN
    EXECUTE format('ALTER TABLE almanac.jobs_default SET (%s)', almanac.job_partition_options());
END $$;

-- The partition of the month (UTC) holding `at`: created if missing and returned. Rows of
-- that month waiting in the default partition move into it (they would otherwise block
-- its creation). The host calls this ahead of need with a lock_timeout: attaching takes
-- a SHARE UPDATE EXCLUSIVE lock on almanac.jobs, which claims and inserts do not wait for.
-- NULL for a month more than 5 years back or 2 years ahead: those slots stay in the default.
CREATE FUNCTION almanac.add_job_partition(at timestamptz) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    first timestamptz := date_trunc('month', at, 'UTC');
    next  timestamptz := date_trunc('month', at, 'UTC') + interval '1 month';
    name  text := 'jobs_' || to_char(at AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF first < date_trunc('month', now(), 'UTC') - interval '5 years'
       OR first > date_trunc('month', now(), 'UTC') + interval '2 years' THEN
        RETURN NULL;
    END IF;
    IF to_regclass('almanac.' || name) IS NOT NULL THEN
        RETURN name;
    END IF;
    -- Hosts creating the same month wait for each other instead of colliding.
    PERFORM pg_advisory_xact_lock(hashtext('almanac.add_job_partition'));
    IF to_regclass('almanac.' || name) IS NOT NULL THEN
        RETURN name;
    END IF;
    EXECUTE format('CREATE TABLE almanac.%I (LIKE almanac.jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH (%s)',
                   name, almanac.job_partition_options());
    EXECUTE format('WITH moved AS (DELETE FROM almanac.jobs_default WHERE slot >= %L AND slot < %L RETURNING *) '
                   'INSERT INTO almanac.%I SELECT * FROM moved', first, next, name);
    EXECUTE format('ALTER TABLE almanac.jobs ATTACH PARTITION almanac.%I FOR VALUES FROM (%L) TO (%L)', name, first, next);
    RETURN name;
END $$;

-- The months the existing rows fall in (within the window above), and the months around now.
SELECT count(almanac.add_job_partition(m))
FROM (
    SELECT DISTINCT date_trunc('month', slot, 'UTC') AS m FROM almanac.jobs_v8
    UNION
    SELECT date_trunc('month', now(), 'UTC') + make_interval(months => i) FROM generate_series(-1, 3) i
) months;

INSERT INTO almanac.jobs (task, slot, key, status, attempts, run_after, payload, last_error, plugin_digest,
                          created_at, completed_at, retries, crashes)
SELECT task, slot, key, status, attempts, run_after, payload, last_error, plugin_digest,
       created_at, completed_at, retries, crashes
FROM almanac.jobs_v8;

-- Rows accepted before V8 are kept as they were, as V8 did.
ALTER TABLE almanac.jobs ADD CONSTRAINT payload_at_most_1mib
    CHECK (payload IS NULL OR octet_length(payload::text) <= 1048576) NOT VALID;

DROP TABLE almanac.jobs_v8;

CREATE TRIGGER jobs_notify AFTER INSERT ON almanac.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION almanac.notify_jobs();

-- Done jobs, counted where they are marked (the claim, +1), unmarked (a failure or a job
-- put back, -1) and dropped (prune), per task and month of slot, so `status`, the
-- dashboard and the metrics never count the history. Append-only: a batch adds one row
-- per task, so concurrent workers never wait for each other on a counter row; the host
-- folds the rows into one per (task, month) every few seconds (almanac.fold_counts).
CREATE TABLE almanac.done_counts (
    task  text        NOT NULL,
    month timestamptz NOT NULL,
    done  bigint      NOT NULL
);
CREATE INDEX done_counts_task ON almanac.done_counts (task, month);
ALTER TABLE almanac.done_counts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

INSERT INTO almanac.done_counts (task, month, done)
SELECT task, date_trunc('month', slot, 'UTC'), count(*)
FROM almanac.jobs WHERE status = 'done'
GROUP BY 1, 2;

-- Delivered outbox messages, counted the same way (the dispatcher adds per commit), so
-- `status` and the dashboard do not count the outbox's delivered history either; pending
-- and dead messages are counted through their partial indexes.
CREATE TABLE almanac.delivered_counts (
    task      text,
    topic     text   NOT NULL,
    delivered bigint NOT NULL
);
ALTER TABLE almanac.delivered_counts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

INSERT INTO almanac.delivered_counts (task, topic, delivered)
SELECT task, topic, count(*) FROM ONLY almanac.outbox WHERE status = 'delivered' GROUP BY 1, 2;

-- Both counters' appended rows folded into one per key. Rows appended meanwhile are not
-- in this statement's snapshot and stay for the next fold.
CREATE FUNCTION almanac.fold_counts() RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH taken AS (
        DELETE FROM almanac.done_counts RETURNING task, month, done
    )
    INSERT INTO almanac.done_counts (task, month, done)
    SELECT task, month, sum(done) FROM taken GROUP BY task, month HAVING sum(done) <> 0;
    WITH taken AS (
        DELETE FROM almanac.delivered_counts RETURNING task, topic, delivered
    )
    INSERT INTO almanac.delivered_counts (task, topic, delivered)
    SELECT task, topic, sum(delivered) FROM taken GROUP BY task, topic HAVING sum(delivered) <> 0;
$$;

-- The latest failures of a task, newest first, for `status`'s last error.
CREATE INDEX attempts_task ON almanac.attempts (task, id);

-- Per task, the counts `status`, the dashboard and the metrics show, none read from the
-- history: pending jobs and the oldest due one from the partial index jobs_pending (its
-- columns suffice: an index-only scan), failed and discarded from their partial indexes,
-- done from almanac.done_counts. `oldest_due` is when the longest-waiting due job became
-- due (a job scheduled for later, or waiting out a retry's backoff, is not waiting).
CREATE VIEW almanac.task_counts AS
WITH pending AS (
    SELECT task, count(*) AS pending, min(run_after) FILTER (WHERE run_after <= now()) AS oldest_due
    FROM almanac.jobs WHERE status = 'pending' GROUP BY task
), failed AS (
    SELECT task, count(*) AS failed FROM almanac.jobs WHERE status = 'failed' GROUP BY task
), discarded AS (
    SELECT task, count(*) AS discarded FROM almanac.jobs WHERE status = 'discarded' GROUP BY task
), done AS (
    SELECT task, sum(done)::bigint AS done FROM almanac.done_counts GROUP BY task
), tasks AS (
    SELECT task FROM pending UNION SELECT task FROM failed UNION SELECT task FROM discarded
    UNION SELECT task FROM done WHERE done <> 0
)
SELECT t.task,
       coalesce(p.pending, 0)   AS pending,
       p.oldest_due,
       coalesce(f.failed, 0)    AS failed,
       coalesce(x.discarded, 0) AS discarded,
       coalesce(d.done, 0)      AS done
FROM tasks t
LEFT JOIN pending p ON p.task = t.task
LEFT JOIN failed f ON f.task = t.task
LEFT JOIN discarded x ON x.task = t.task
LEFT JOIN done d ON d.task = t.task;

-- The month partitions of almanac.jobs with their bounds (the default partition has none).
CREATE VIEW almanac.job_partitions AS
SELECT c.oid::regclass AS partition, b[1]::timestamptz AS first, b[2]::timestamptz AS next
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']*)''\) TO \(''([^'']*)''\)') b
WHERE i.inhparent = 'almanac.jobs'::regclass AND b IS NOT NULL;

-- `almanac prune`: drop one month partition with its done counts and attempt history;
-- returns how many done jobs went with it, or NULL (nothing dropped) while it holds a
-- job still to run (pending or failed: those are not history). DROP needs an ACCESS
-- EXCLUSIVE lock on almanac.jobs; it is taken first, before the check (so no job can
-- enter the month between the check and the drop) and before any lock on the partition
-- (a claim locks almanac.jobs, then its partitions: the other order deadlocks with it).
-- It is held for the milliseconds the check and the drop take; the caller sets a
-- lock_timeout so a long transaction makes prune give up rather than stall every claim.
CREATE FUNCTION almanac.drop_job_partition(part regclass) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bounds record;
    busy boolean;
    dropped bigint;
BEGIN
    SELECT p.first, p.next INTO bounds FROM almanac.job_partitions p WHERE p.partition = part;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% is not a month partition of almanac.jobs', part USING ERRCODE = '22023';
    END IF;
    LOCK TABLE almanac.jobs IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE status IN (''pending'', ''failed''))', part) INTO busy;
    IF busy THEN
        RETURN NULL;
    END IF;
    WITH gone AS (DELETE FROM almanac.done_counts WHERE month = bounds.first RETURNING done)
    SELECT coalesce(sum(done), 0) INTO dropped FROM gone;
    DELETE FROM almanac.attempts WHERE slot >= bounds.first AND slot < bounds.next;
    EXECUTE format('DROP TABLE %s', part);
    RETURN dropped;
END $$;
