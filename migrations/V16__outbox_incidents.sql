-- Through a receiver's outage (issue 30). Each topic carries its circuit breaker, shared
-- by every host: consecutive failed deliveries, and while it is open the time before the
-- next probe. An operator may pause a topic (no deliveries on any host until resumed),
-- and recall messages not yet delivered: `discarded`, with the reason and who said so,
-- kept as evidence.
ALTER TABLE almanac.outbox_topics
    ADD COLUMN paused        boolean     NOT NULL DEFAULT false,
    ADD COLUMN paused_reason text,
    -- Deliveries that failed in a row (any host); 0 after a success.
    ADD COLUMN failures      integer     NOT NULL DEFAULT 0,
    -- Every failed delivery of the topic, ever (the metric an alert takes a rate of).
    ADD COLUMN failures_total bigint     NOT NULL DEFAULT 0,
    -- Set when the circuit opened; NULL while it is closed.
    ADD COLUMN opened_at     timestamptz,
    -- While the circuit is open: no delivery before this; then one probe takes the
    -- topic's row lock and moves it a cooldown ahead.
    ADD COLUMN open_until    timestamptz,
    ADD COLUMN last_error    text;

-- V13 made the check beside V3's table of the same name, so its name is PostgreSQL's
-- choice (outbox_status_check1): found, not assumed.
DO $$
DECLARE
    c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'almanac.outbox'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%status%' LOOP
        EXECUTE format('ALTER TABLE almanac.outbox DROP CONSTRAINT %I', c);
    END LOOP;
END $$;
ALTER TABLE almanac.outbox ADD CONSTRAINT outbox_status_check CHECK (status IN ('pending', 'delivered', 'dead', 'discarded'));
ALTER TABLE almanac.outbox
    ADD COLUMN discarded_reason text,
    ADD COLUMN discarded_by     text;

-- As V13's, taking only the month's delivered messages out of the delivered counts: a
-- discarded one was never counted there.
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
    EXECUTE format('DROP TABLE %s', part);
    RETURN dropped;
END $$;
