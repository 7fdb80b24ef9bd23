-- The outbox's delivered history in month partitions (of created_at), as the jobs' is:
-- a year of messages is dropped a month at a time (`almanac prune`), never deleted row
-- by row, and counted without being read (almanac.delivered_counts, V9).
--
-- A partitioned table has no unique index across its partitions, so a message's
-- identity (topic, key) is kept by almanac_job.publish itself: it takes a transaction
-- lock on the identity, then looks for it in every month, then inserts. Dedupe evidence
-- lasts as long as the month holding it: `prune` refuses a cut inside any task's
-- backfill horizon, the only way a job that published a message can run again.

DROP VIEW almanac.outbox_counts;
DROP TRIGGER outbox_notify ON almanac.outbox;
ALTER TABLE almanac.outbox RENAME TO outbox_v12;
ALTER TABLE almanac.outbox_v12 RENAME CONSTRAINT outbox_pkey TO outbox_v12_pkey;
ALTER TABLE almanac.outbox_v12 RENAME CONSTRAINT outbox_topic_key_key TO outbox_v12_topic_key_key;
ALTER INDEX almanac.outbox_pending RENAME TO outbox_v12_pending;
ALTER INDEX almanac.outbox_dead RENAME TO outbox_v12_dead;

CREATE TABLE almanac.outbox (
    id              bigint      NOT NULL DEFAULT nextval('almanac.outbox_id_seq'),
    topic           text        NOT NULL,
    key             text        NOT NULL,
    payload         bytea       NOT NULL,
    content_type    text        NOT NULL,
    task            text,
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    dispatched_at   timestamptz,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE almanac.outbox_id_seq OWNED BY almanac.outbox.id;

-- What publish looks a message up by, in each month.
CREATE INDEX outbox_identity ON almanac.outbox (topic, key);
-- Dispatchers claim through this (pending rows alone, in claim order).
CREATE INDEX outbox_pending ON almanac.outbox (next_attempt_at, id) WHERE status = 'pending';
-- The dashboard's dead letters.
CREATE INDEX outbox_dead ON almanac.outbox (topic, id DESC) WHERE status = 'dead';

CREATE TABLE almanac.outbox_default PARTITION OF almanac.outbox DEFAULT;

-- The month partitions of almanac.outbox with their bounds (the default has none).
CREATE VIEW almanac.outbox_partitions AS
SELECT c.oid::regclass AS partition, b[1]::timestamptz AS first, b[2]::timestamptz AS next
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']*)''\) TO \(''([^'']*)''\)') b
WHERE i.inhparent = 'almanac.outbox'::regclass AND b IS NOT NULL;

-- The partition of the month (UTC) holding `at`, created if missing, as
-- almanac.add_job_partition does for jobs (rows of that month in the default partition
-- move into it). Messages are written now, so only months from 5 years back to 1 ahead.
CREATE FUNCTION almanac.add_outbox_partition(at timestamptz) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    first timestamptz := date_trunc('month', at, 'UTC');
    next  timestamptz := date_trunc('month', at, 'UTC') + interval '1 month';
    name  text := 'outbox_' || to_char(at AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF first < date_trunc('month', now(), 'UTC') - interval '5 years'
       OR first > date_trunc('month', now(), 'UTC') + interval '1 year' THEN
        RETURN NULL;
    END IF;
    IF to_regclass('almanac.' || name) IS NOT NULL THEN
        RETURN name;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('almanac.add_outbox_partition'));
    IF to_regclass('almanac.' || name) IS NOT NULL THEN
        RETURN name;
    END IF;
    EXECUTE format('CREATE TABLE almanac.%I (LIKE almanac.outbox INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
    EXECUTE format('WITH moved AS (DELETE FROM almanac.outbox_default WHERE created_at >= %L AND created_at < %L RETURNING *) '
                   'INSERT INTO almanac.%I SELECT * FROM moved', first, next, name);
    EXECUTE format('ALTER TABLE almanac.outbox ATTACH PARTITION almanac.%I FOR VALUES FROM (%L) TO (%L)', name, first, next);
    RETURN name;
END $$;

SELECT count(almanac.add_outbox_partition(m))
FROM (
    SELECT DISTINCT date_trunc('month', created_at, 'UTC') AS m FROM almanac.outbox_v12
    UNION
    SELECT date_trunc('month', now(), 'UTC') + make_interval(months => i) FROM generate_series(0, 1) i
) months;

INSERT INTO almanac.outbox SELECT * FROM almanac.outbox_v12;
DROP TABLE almanac.outbox_v12;

CREATE TRIGGER outbox_notify AFTER INSERT ON almanac.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION almanac.notify_outbox();

-- As V9's, over every month.
CREATE VIEW almanac.outbox_counts AS
WITH waiting AS (
    SELECT task, topic,
           count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'dead')    AS dead
    FROM almanac.outbox
    WHERE status IN ('pending', 'dead')
    GROUP BY task, topic
), delivered AS (
    SELECT task, topic, sum(delivered)::bigint AS delivered FROM almanac.delivered_counts GROUP BY task, topic
)
SELECT coalesce(w.task, d.task) AS task, coalesce(w.topic, d.topic) AS topic,
       coalesce(w.pending, 0) AS pending, coalesce(w.dead, 0) AS dead, coalesce(d.delivered, 0) AS delivered
FROM waiting w
FULL JOIN delivered d ON coalesce(d.task, '') = coalesce(w.task, '') AND d.topic = w.topic;

-- `almanac prune`: drop one month of the outbox, taking its delivered messages out of
-- the counts; NULL (nothing dropped) while it holds a message still to deliver or a dead
-- one (an operator's to retry). The lock on almanac.outbox comes first, as in
-- almanac.drop_job_partition; the caller sets a lock_timeout.
CREATE FUNCTION almanac.drop_outbox_partition(part regclass) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    busy boolean;
    dropped bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM almanac.outbox_partitions p WHERE p.partition = part) THEN
        RAISE EXCEPTION '% is not a month partition of almanac.outbox', part USING ERRCODE = '22023';
    END IF;
    LOCK TABLE almanac.outbox IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE status IN (''pending'', ''dead''))', part) INTO busy;
    IF busy THEN
        RETURN NULL;
    END IF;
    EXECUTE format('WITH gone AS (SELECT task, topic, count(*) AS n FROM %s GROUP BY 1, 2), '
                   'uncounted AS (INSERT INTO almanac.delivered_counts (task, topic, delivered) SELECT task, topic, -n FROM gone) '
                   'SELECT coalesce(sum(n), 0) FROM gone', part) INTO dropped;
    EXECUTE format('DROP TABLE %s', part);
    RETURN dropped;
END $$;

-- One message per (topic, key), across every month: see the top of this file.
CREATE OR REPLACE FUNCTION almanac_job.publish(topic text, key text, payload bytea, content_type text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
    allowed text[];
BEGIN
    IF publish.topic !~ '^[a-z0-9._-]{1,200}$' OR octet_length(publish.key) NOT BETWEEN 1 AND 1000
       OR octet_length(publish.payload) > 1048576 OR publish.content_type !~ '^[ -~]{1,200}$' THEN
        RAISE EXCEPTION 'refused: an outbox message outside its bounds (topic, key, payload of at most 1 MiB, content type)' USING ERRCODE = '22023';
    END IF;
    INSERT INTO almanac.outbox_topics AS t (topic, publishers) VALUES (publish.topic, ARRAY[mine]) ON CONFLICT (topic) DO NOTHING;
    SELECT t.publishers INTO allowed FROM almanac.outbox_topics t WHERE t.topic = publish.topic;
    IF NOT mine = ANY(allowed) THEN
        RAISE EXCEPTION 'refused: task % may not publish on outbox topic % (its publishers: %)', mine, publish.topic, array_to_string(allowed, ', ')
            USING ERRCODE = '42501', HINT = 'name the task in [outbox.topics.' || publish.topic || '] publishers in almanac.toml';
    END IF;
    -- Two jobs publishing one identity wait for each other here; the second then sees the
    -- first's message once it committed (each statement reads afresh in READ COMMITTED),
    -- or inserts its own if the first rolled back. A topic holds no newline.
    PERFORM pg_advisory_xact_lock(hashtextextended(publish.topic || E'\n' || publish.key, 0));
    IF EXISTS (SELECT 1 FROM almanac.outbox o WHERE o.topic = publish.topic AND o.key = publish.key) THEN
        RETURN 0;
    END IF;
    INSERT INTO almanac.outbox (topic, key, payload, content_type, task)
    VALUES (publish.topic, publish.key, publish.payload, publish.content_type, mine);
    RETURN 1;
END $$;
