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
    SELECT date_trunc('month', now(), 'UTC') + make_interval(months => i) FROM generate_series(-1, 1) i
) months;

INSERT INTO almanac.jobs (task, slot, key, status, attempts, run_after, payload, last_error, plugin_digest,
                          created_at, completed_at, retries, crashes)
SELECT task, slot, key, status, attempts, run_after, payload, last_error, plugin_digest,
       created_at, completed_at, retries, crashes
FROM almanac.jobs_v8;

-- Rows accepted before V8 are kept as they were, as V8 did.
ALTER TABLE almanac.jobs ADD CONSTRAINT payload_at_most_1mib
    CHECK (payload IS NULL OR octet_length(payload::text) <= 1048576) NOT VALID;

-- A slot and a run_after are instants the host reads back into its own type (years 1 to
-- 9999 here): '-infinity', 'infinity' or year 200000 would be stored, then fail to decode
-- in the claim of every host that reached the row (and a '-infinity' slot in the default
-- partition would set every claim's floor to it). Refused at the door instead, whoever
-- inserts. NOT VALID, like the payload's bound: rows already there are not re-read.
ALTER TABLE almanac.jobs ADD CONSTRAINT instants_in_range
    CHECK (slot >= '0001-01-01 00:00:00+00' AND slot < '10000-01-01 00:00:00+00'
           AND run_after >= '0001-01-01 00:00:00+00' AND run_after < '10000-01-01 00:00:00+00') NOT VALID;

DROP TABLE almanac.jobs_v8;

CREATE TRIGGER jobs_notify AFTER INSERT ON almanac.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION almanac.notify_jobs();

-- Jobs per task, month of slot and status, counted where they change so that `status`,
-- the dashboard and the metrics never count the history. Append-only deltas: an insert
-- or delete of jobs adds its counts by statement trigger (whoever inserts: the scheduler,
-- almanac.enqueue, a direct INSERT); the host's own status changes add theirs in the same
-- statement (the claim: pending -n, done +n; a failure, a put-back, discard, retry);
-- `prune` deletes a dropped month's rows. A batch adds one row per task and month, so
-- concurrent workers never wait on a counter row; hosts fold the rows into one per
-- (task, month) every few seconds (almanac.fold_counts). A status changed by a hand-made
-- UPDATE of almanac.jobs is not counted.
CREATE TABLE almanac.job_counts (
    task      text        NOT NULL,
    month     timestamptz NOT NULL,
    pending   bigint      NOT NULL DEFAULT 0,
    done      bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    discarded bigint      NOT NULL DEFAULT 0
);
CREATE INDEX job_counts_task ON almanac.job_counts (task, month);
ALTER TABLE almanac.job_counts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

INSERT INTO almanac.job_counts (task, month, pending, done, failed, discarded)
SELECT task, date_trunc('month', slot, 'UTC'),
       count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'discarded')
FROM almanac.jobs
GROUP BY 1, 2;

-- The statement's rows (`changed`), counted with `sign` (+1 inserted, -1 deleted).
CREATE FUNCTION almanac.count_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sign int := CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
BEGIN
    INSERT INTO almanac.job_counts (task, month, pending, done, failed, discarded)
    SELECT task, date_trunc('month', slot, 'UTC'),
           sign * count(*) FILTER (WHERE status = 'pending'), sign * count(*) FILTER (WHERE status = 'done'),
           sign * count(*) FILTER (WHERE status = 'failed'), sign * count(*) FILTER (WHERE status = 'discarded')
    FROM changed
    GROUP BY 1, 2;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_count_inserted AFTER INSERT ON almanac.jobs
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION almanac.count_jobs();
CREATE TRIGGER jobs_count_deleted AFTER DELETE ON almanac.jobs
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION almanac.count_jobs();

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
        DELETE FROM almanac.job_counts RETURNING *
    )
    INSERT INTO almanac.job_counts (task, month, pending, done, failed, discarded)
    SELECT task, month, sum(pending), sum(done), sum(failed), sum(discarded)
    FROM taken GROUP BY task, month
    HAVING (sum(pending), sum(done), sum(failed), sum(discarded)) <> (0, 0, 0, 0);
    WITH taken AS (
        DELETE FROM almanac.delivered_counts RETURNING task, topic, delivered
    )
    INSERT INTO almanac.delivered_counts (task, topic, delivered)
    SELECT task, topic, sum(delivered) FROM taken GROUP BY task, topic HAVING sum(delivered) <> 0;
$$;

-- The latest failures of a task, newest first, for `status`'s last error.
CREATE INDEX attempts_task ON almanac.attempts (task, id);

-- Per task, the counts `status`, the dashboard and the metrics show, none read from the
-- history: the counters above, and when the longest-waiting due job became due (the first
-- entry of the task in the pending index; a job scheduled for later, or waiting out a
-- retry's backoff, is not waiting).
CREATE VIEW almanac.task_counts AS
WITH counted AS (
    SELECT task, sum(pending)::bigint AS pending, sum(done)::bigint AS done,
           sum(failed)::bigint AS failed, sum(discarded)::bigint AS discarded
    FROM almanac.job_counts
    GROUP BY task
)
SELECT c.task, c.pending,
       (SELECT min(j.run_after) FROM almanac.jobs j
         WHERE j.status = 'pending' AND j.task = c.task AND j.run_after <= now()) AS oldest_due,
       c.failed, c.discarded, c.done
FROM counted c
WHERE (c.pending, c.done, c.failed, c.discarded) <> (0, 0, 0, 0);

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
    WITH gone AS (DELETE FROM almanac.job_counts WHERE month = bounds.first RETURNING done)
    SELECT coalesce(sum(done), 0) INTO dropped FROM gone;
    DELETE FROM almanac.attempts WHERE slot >= bounds.first AND slot < bounds.next;
    EXECUTE format('DROP TABLE %s', part);
    RETURN dropped;
END $$;

-- Where a claim looks from (host/src/executor: written into the claim's text, so the
-- plan holds only these partitions and those after): the start of the oldest month
-- partition holding a pending job, or of last month if none older does; older still if
-- the default partition holds a pending job of an older slot (the claim's `slot >=` is a
-- condition on rows too, and the default partition is in every plan). A generic plan
-- over a partitioned table locks every partition it names on every execution; over a
-- year of history that is most of a claim's cost. Hosts ask every few seconds.
CREATE FUNCTION almanac.claim_floor() RETURNS timestamptz
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    floor timestamptz := date_trunc('month', now(), 'UTC') - interval '1 month';
    p record;
    pending boolean;
BEGIN
    floor := least(floor, (SELECT date_trunc('month', greatest(min(d.slot), '0001-01-01 00:00:00+00'), 'UTC')
                           FROM almanac.jobs_default d WHERE d.status = 'pending'));
    FOR p IN SELECT j.partition, j.first FROM almanac.job_partitions j WHERE j.first < floor ORDER BY j.first LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE status = ''pending'')', p.partition) INTO pending;
        IF pending THEN
            RETURN p.first;
        END IF;
    END LOOP;
    RETURN floor;
END $$;

-- Outbox messages per publishing task and topic, none read from the delivered history:
-- pending and dead through their partial indexes, delivered from almanac.delivered_counts.
-- `status` sums it by task, the dashboard by topic.
CREATE VIEW almanac.outbox_counts AS
WITH waiting AS (
    SELECT task, topic,
           count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'dead')    AS dead
    FROM ONLY almanac.outbox
    WHERE status IN ('pending', 'dead')
    GROUP BY task, topic
), delivered AS (
    SELECT task, topic, sum(delivered)::bigint AS delivered FROM almanac.delivered_counts GROUP BY task, topic
)
-- A message written some other way has no task (NULL); no task is named ''.
SELECT coalesce(w.task, d.task) AS task, coalesce(w.topic, d.topic) AS topic,
       coalesce(w.pending, 0) AS pending, coalesce(w.dead, 0) AS dead, coalesce(d.delivered, 0) AS delivered
FROM waiting w
FULL JOIN delivered d ON coalesce(d.task, '') = coalesce(w.task, '') AND d.topic = w.topic;
