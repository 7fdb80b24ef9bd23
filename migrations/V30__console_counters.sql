-- Counters the console reads so that its calendar and charts never count the history
-- (host/src/dashboard): jobs per (task, period) and status, jobs done and failed per
-- (task, minute) with how long the oldest due job had waited, messages delivered and dead
-- per (topic, minute). Append-only deltas like almanac.job_counts (V9): a statement adds
-- one row per key it changed, so concurrent workers never wait on a counter row, and
-- almanac.fold_counts folds the new rows (NOT folded, found through a small partial index)
-- into the one folded row per key: only what changed since the last fold is rewritten.
--
-- The jobs' counters are kept by statement triggers, so every statement naming
-- almanac.jobs is counted, a hand-made UPDATE included (one naming a partition itself is
-- not: prune's own, which counts its rows, and a month's move out of the default
-- partition, which changes no count): an insert or delete adds its rows per period, an
-- UPDATE the status changes it made. A claim marks its jobs done and a failure in the same
-- transaction moves one back (same now(), same minute), so the host's own statements never
-- take a minute's net `done` below zero. A minute's `failed` is the failed attempts
-- recorded in it (almanac.attempts, errors and crashes: jobs that will retry and jobs that
-- failed for good; an interruption by the database is no failure), counted as they are
-- inserted: a later retry does not take a past failure back.

CREATE TABLE almanac.slot_counts (
    task      text        NOT NULL,
    slot      timestamptz NOT NULL,
    pending   bigint      NOT NULL DEFAULT 0,
    done      bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    discarded bigint      NOT NULL DEFAULT 0,
    folded    boolean     NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX slot_counts_folded ON almanac.slot_counts (task, slot) WHERE folded;
CREATE INDEX slot_counts_new ON almanac.slot_counts (task, slot) WHERE NOT folded;
ALTER TABLE almanac.slot_counts SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000);

-- Hosts of the previous version may be claiming meanwhile: no job changes between this
-- count and the triggers below (CREATE TRIGGER takes this lock anyway).
LOCK TABLE almanac.jobs IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO almanac.slot_counts (task, slot, pending, done, failed, discarded, folded)
SELECT task, slot,
       count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'discarded'), true
FROM almanac.jobs
GROUP BY 1, 2;

CREATE TABLE almanac.task_minutes (
    task   text        NOT NULL,
    minute timestamptz NOT NULL,
    done   bigint      NOT NULL DEFAULT 0,
    failed bigint      NOT NULL DEFAULT 0,
    -- Seconds the oldest due job had waited, the most sampled in the minute.
    waited double precision NOT NULL DEFAULT 0,
    folded boolean     NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX task_minutes_folded ON almanac.task_minutes (task, minute) WHERE folded;
CREATE INDEX task_minutes_new ON almanac.task_minutes (task, minute) WHERE NOT folded;
CREATE INDEX task_minutes_minute ON almanac.task_minutes (minute);

CREATE TABLE almanac.topic_minutes (
    topic     text        NOT NULL,
    minute    timestamptz NOT NULL,
    delivered bigint      NOT NULL DEFAULT 0,
    dead      bigint      NOT NULL DEFAULT 0,
    folded    boolean     NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX topic_minutes_folded ON almanac.topic_minutes (topic, minute) WHERE folded;
CREATE INDEX topic_minutes_new ON almanac.topic_minutes (topic, minute) WHERE NOT folded;
CREATE INDEX topic_minutes_minute ON almanac.topic_minutes (minute);

-- As V9's, and the periods' counts beside the months'.
CREATE OR REPLACE FUNCTION almanac.count_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sign int := CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
BEGIN
    WITH months AS (
        INSERT INTO almanac.job_counts (task, month, pending, done, failed, discarded)
        SELECT task, date_trunc('month', slot, 'UTC'),
               sign * count(*) FILTER (WHERE status = 'pending'), sign * count(*) FILTER (WHERE status = 'done'),
               sign * count(*) FILTER (WHERE status = 'failed'), sign * count(*) FILTER (WHERE status = 'discarded')
        FROM changed
        GROUP BY 1, 2
    )
    INSERT INTO almanac.slot_counts (task, slot, pending, done, failed, discarded)
    SELECT task, slot,
           sign * count(*) FILTER (WHERE status = 'pending'), sign * count(*) FILTER (WHERE status = 'done'),
           sign * count(*) FILTER (WHERE status = 'failed'), sign * count(*) FILTER (WHERE status = 'discarded')
    FROM changed
    GROUP BY 1, 2;
    RETURN NULL;
END $$;

-- The status changes an UPDATE made, per period, and the jobs that became done per
-- minute: each row as it became counted +1, as it was -1, so a row whose status stayed
-- adds nothing (and a statement that changed no status, no counter row).
CREATE FUNCTION almanac.count_job_changes() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WITH delta AS (
        SELECT task, slot, status, 1 AS n FROM changed_to
        UNION ALL
        SELECT task, slot, status, -1 FROM changed_from
    ), per_slot AS (
        SELECT task, slot,
               coalesce(sum(n) FILTER (WHERE status = 'pending'), 0) AS p,
               coalesce(sum(n) FILTER (WHERE status = 'done'), 0) AS d,
               coalesce(sum(n) FILTER (WHERE status = 'failed'), 0) AS f,
               coalesce(sum(n) FILTER (WHERE status = 'discarded'), 0) AS x
        FROM delta GROUP BY 1, 2
    ), periods AS (
        INSERT INTO almanac.slot_counts (task, slot, pending, done, failed, discarded)
        SELECT task, slot, p, d, f, x FROM per_slot WHERE (p, d, f, x) <> (0, 0, 0, 0)
    )
    INSERT INTO almanac.task_minutes (task, minute, done)
    SELECT task, date_trunc('minute', now(), 'UTC'), sum(d)
    FROM per_slot
    GROUP BY task
    HAVING sum(d) <> 0;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_count_updated AFTER UPDATE ON almanac.jobs
    REFERENCING OLD TABLE AS changed_from NEW TABLE AS changed_to
    FOR EACH STATEMENT EXECUTE FUNCTION almanac.count_job_changes();

-- The failed attempts a statement recorded, per task and minute.
CREATE FUNCTION almanac.count_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO almanac.task_minutes (task, minute, failed)
    SELECT task, date_trunc('minute', now(), 'UTC'), count(*)
    FROM recorded
    WHERE kind <> 'transient'
    GROUP BY task;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_count_failed AFTER INSERT ON almanac.attempts
    REFERENCING NEW TABLE AS recorded FOR EACH STATEMENT EXECUTE FUNCTION almanac.count_attempts();

-- As V9's, and the dropped month's periods leave their counters too.
CREATE OR REPLACE FUNCTION almanac.drop_job_partition(part regclass) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bounds record;
    busy boolean;
    dropped bigint;
    tasks text[];
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
    tasks := ARRAY(SELECT DISTINCT c.task FROM almanac.job_counts c WHERE c.month = bounds.first);
    WITH gone AS (DELETE FROM almanac.job_counts WHERE month = bounds.first RETURNING done)
    SELECT coalesce(sum(done), 0) INTO dropped FROM gone;
    -- Through the counters' (task, slot) indexes, for the tasks the month held, while
    -- every claim waits on the lock above.
    DELETE FROM almanac.slot_counts
    WHERE folded AND task = ANY (tasks) AND slot >= bounds.first AND slot < bounds.next;
    DELETE FROM almanac.slot_counts
    WHERE NOT folded AND task = ANY (tasks) AND slot >= bounds.first AND slot < bounds.next;
    DELETE FROM almanac.attempts WHERE slot >= bounds.first AND slot < bounds.next;
    EXECUTE format('DROP TABLE %s', part);
    RETURN dropped;
END $$;

-- As V9's, and the console's counters: their new rows added into the folded ones, the
-- oldest due job's wait sampled per task, minutes older than two days dropped.
CREATE OR REPLACE FUNCTION almanac.fold_counts() RETURNS void
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

    WITH taken AS (
        DELETE FROM almanac.slot_counts WHERE NOT folded RETURNING *
    )
    INSERT INTO almanac.slot_counts AS c (task, slot, pending, done, failed, discarded, folded)
    SELECT task, slot, sum(pending), sum(done), sum(failed), sum(discarded), true
    FROM taken GROUP BY task, slot
    ON CONFLICT (task, slot) WHERE folded DO UPDATE
    SET pending = c.pending + excluded.pending, done = c.done + excluded.done,
        failed = c.failed + excluded.failed, discarded = c.discarded + excluded.discarded;

    INSERT INTO almanac.task_minutes (task, minute, waited)
    SELECT task, date_trunc('minute', now(), 'UTC'), extract(epoch FROM now() - oldest_due)
    FROM almanac.task_counts
    WHERE oldest_due IS NOT NULL;
    DELETE FROM almanac.task_minutes WHERE minute < now() - interval '2 days';
    WITH taken AS (
        DELETE FROM almanac.task_minutes WHERE NOT folded RETURNING *
    )
    INSERT INTO almanac.task_minutes AS c (task, minute, done, failed, waited, folded)
    SELECT task, minute, sum(done), sum(failed), max(waited), true
    FROM taken GROUP BY task, minute
    ON CONFLICT (task, minute) WHERE folded DO UPDATE
    SET done = c.done + excluded.done, failed = c.failed + excluded.failed, waited = greatest(c.waited, excluded.waited);

    DELETE FROM almanac.topic_minutes WHERE minute < now() - interval '2 days';
    WITH taken AS (
        DELETE FROM almanac.topic_minutes WHERE NOT folded RETURNING *
    )
    INSERT INTO almanac.topic_minutes AS c (topic, minute, delivered, dead, folded)
    SELECT topic, minute, sum(delivered), sum(dead), true
    FROM taken GROUP BY topic, minute
    ON CONFLICT (topic, minute) WHERE folded DO UPDATE
    SET delivered = c.delivered + excluded.delivered, dead = c.dead + excluded.dead;
$$;

-- A backfill is recorded too (`almanac backfill` and the console), with its range and
-- what it generated.
ALTER TABLE almanac.changes DROP CONSTRAINT changes_action_check;
ALTER TABLE almanac.changes ADD CONSTRAINT changes_action_check
    CHECK (action IN ('register', 'apply', 'cursor', 'pause', 'resume', 'forget', 'discard', 'hold', 'release',
                      'retry', 'enqueue', 'settings', 'backfill',
                      'outbox-pause', 'outbox-resume', 'outbox-deliver-now', 'outbox-discard', 'outbox-retry')) NOT VALID;
ALTER TABLE almanac.changes VALIDATE CONSTRAINT changes_action_check;
