-- No lock a host needs can be taken by a plugin. Advisory-lock keys are anyone's: a
-- plugin that reached pg_advisory_lock through a function it may call (an application's
-- SECURITY DEFINER function, an extension's text-SQL runner) held the migration key and
-- hung every host start until its job's deadline. The host's locks are now row locks on
-- host tables, which no plugin role may read, let alone lock:
-- - migrating: almanac.migration_lock, made before the first migration (host/src/migrate);
-- - creating a month of history, folding the counters: rows of almanac.host_locks;
-- - one outbox message per (topic, key): the key's row in almanac.outbox_keys, whose
--   primary key makes a second publish of the identity wait for the first's transaction
--   and then do nothing (it replaces the advisory lock and the look through every month).

CREATE TABLE almanac.host_locks (
    name text PRIMARY KEY
);
INSERT INTO almanac.host_locks (name) VALUES ('add_job_partition'), ('add_outbox_partition'), ('fold_counts');

CREATE OR REPLACE FUNCTION almanac.add_job_partition(at timestamptz) RETURNS text
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
    PERFORM 1 FROM almanac.host_locks l WHERE l.name = 'add_job_partition' FOR UPDATE;
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

CREATE OR REPLACE FUNCTION almanac.add_outbox_partition(at timestamptz) RETURNS text
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
    PERFORM 1 FROM almanac.host_locks l WHERE l.name = 'add_outbox_partition' FOR UPDATE;
    IF to_regclass('almanac.' || name) IS NOT NULL THEN
        RETURN name;
    END IF;
    EXECUTE format('CREATE TABLE almanac.%I (LIKE almanac.outbox INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
    EXECUTE format('WITH moved AS (DELETE FROM almanac.outbox_default WHERE created_at >= %L AND created_at < %L RETURNING *) '
                   'INSERT INTO almanac.%I SELECT * FROM moved', first, next, name);
    EXECUTE format('ALTER TABLE almanac.outbox ATTACH PARTITION almanac.%I FOR VALUES FROM (%L) TO (%L)', name, first, next);
    RETURN name;
END $$;

-- Every message's identity, once, across the months of almanac.outbox (a partitioned
-- table has no unique index across its partitions). Dropped with its message by prune.
CREATE TABLE almanac.outbox_keys (
    topic text NOT NULL,
    key   text NOT NULL,
    PRIMARY KEY (topic, key)
);
INSERT INTO almanac.outbox_keys (topic, key) SELECT DISTINCT topic, key FROM almanac.outbox;

-- And messages only on topics an operator configured. A publish on a topic no host's
-- almanac.toml names used to make the publishing task its owner for good (any plugin could
-- claim a topic meant for another before the operator named it); now it is refused,
-- naming the fix, and nothing is written. Hosts record every topic their almanac.toml
-- names (`configured`), with its `publishers` when named; a configured topic that names
-- none still belongs to the first task that publishes on it (the host warns at start).
CREATE OR REPLACE FUNCTION almanac_job.publish(topic text, key text, payload bytea, content_type text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
    allowed text[];
    bound boolean;
BEGIN
    IF publish.topic !~ '^[a-z0-9._-]{1,200}$' OR octet_length(publish.key) NOT BETWEEN 1 AND 1000
       OR octet_length(publish.payload) > 1048576 OR publish.content_type !~ '^[ -~]{1,200}$' THEN
        RAISE EXCEPTION 'refused: an outbox message outside its bounds (topic, key, payload of at most 1 MiB, content type)' USING ERRCODE = '22023';
    END IF;
    SELECT t.publishers, t.configured INTO allowed, bound FROM almanac.outbox_topics t WHERE t.topic = publish.topic;
    IF NOT coalesce(bound, false) THEN
        RAISE EXCEPTION 'refused: outbox topic % is configured on no host, so nothing would deliver it', publish.topic
            USING ERRCODE = '55000',
                  HINT = 'add [outbox.topics.' || publish.topic || '] with its sink and publishers = ["' || mine || '"] to almanac.toml, then start a host (or almanac apply)';
    END IF;
    IF cardinality(allowed) = 0 THEN
        -- A configured topic naming no publishers: the first task to publish owns it.
        UPDATE almanac.outbox_topics t SET publishers = ARRAY[mine] WHERE t.topic = publish.topic AND cardinality(t.publishers) = 0;
        SELECT t.publishers INTO allowed FROM almanac.outbox_topics t WHERE t.topic = publish.topic;
    END IF;
    IF NOT mine = ANY(allowed) THEN
        RAISE EXCEPTION 'refused: task % may not publish on outbox topic % (its publishers: %)', mine, publish.topic, array_to_string(allowed, ', ')
            USING ERRCODE = '42501', HINT = 'name the task in [outbox.topics.' || publish.topic || '] publishers in almanac.toml';
    END IF;
    -- A second publish of one identity waits here for the first's transaction: nothing
    -- once that committed, its own message if that rolled back.
    INSERT INTO almanac.outbox_keys AS k (topic, key) VALUES (publish.topic, publish.key) ON CONFLICT (topic, key) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    INSERT INTO almanac.outbox (topic, key, payload, content_type, task)
    VALUES (publish.topic, publish.key, publish.payload, publish.content_type, mine);
    RETURN 1;
END $$;

-- Topics already delivered or claimed keep working until their hosts restart and record
-- them: those with messages count as configured.
UPDATE almanac.outbox_topics t SET configured = true WHERE EXISTS (SELECT 1 FROM almanac.outbox o WHERE o.topic = t.topic);

CREATE OR REPLACE FUNCTION almanac.drop_outbox_partition(part regclass) RETURNS bigint
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
    EXECUTE format('WITH gone AS (SELECT task, topic, count(*) FILTER (WHERE status = ''delivered'') AS n, count(*) AS all_n FROM %s GROUP BY 1, 2), '
                   'uncounted AS (INSERT INTO almanac.delivered_counts (task, topic, delivered) SELECT task, topic, -n FROM gone WHERE n > 0) '
                   'SELECT coalesce(sum(all_n), 0) FROM gone', part) INTO dropped;
    EXECUTE format('DELETE FROM almanac.outbox_keys k USING %s m WHERE k.topic = m.topic AND k.key = m.key', part);
    EXECUTE format('DROP TABLE %s', part);
    RETURN dropped;
END $$;
