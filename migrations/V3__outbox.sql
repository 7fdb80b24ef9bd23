-- The transactional outbox: messages a plugin publishes inside its job's transaction,
-- delivered by the dispatcher after that transaction commits. `(topic, key)` is the
-- message's identity, so a retried or re-created job that publishes again is a no-op.
CREATE TABLE almanac.outbox (
    id              bigserial   PRIMARY KEY,
    topic           text        NOT NULL,
    key             text        NOT NULL,
    payload         bytea       NOT NULL,
    content_type    text        NOT NULL,
    -- The task whose job published the message (for `almanac status`); NULL when a
    -- row was written some other way.
    task            text,
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    dispatched_at   timestamptz,
    UNIQUE (topic, key)
);

-- Claims read only this index: pending messages in claim order, so delivered rows kept
-- for dedupe never slow a claim down.
CREATE INDEX outbox_pending ON almanac.outbox (next_attempt_at, id)
    WHERE status = 'pending';

-- Wake idle dispatchers when messages arrive (delivered on COMMIT, so a rolled-back
-- job wakes no one). Statement-level, like the jobs trigger. `almanac outbox retry`
-- notifies by itself.
CREATE FUNCTION almanac.notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('almanac_outbox', '');
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_notify AFTER INSERT ON almanac.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION almanac.notify_outbox();
