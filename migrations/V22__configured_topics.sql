-- Messages only on topics an operator configured. A publish on a topic no host's
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
