-- Almanac's own tables. Everything lives in schema `almanac`; plugins' tables and the
-- user's business tables live elsewhere.
-- refinery runs this file in one transaction, under the advisory lock `almanac migrate`
-- takes, so concurrent hosts starting together apply it exactly once.

CREATE SCHEMA IF NOT EXISTS almanac;

-- One row per task: the effective schedule and the cursor. `generated_through` is the
-- start of the newest slot whose jobs are committed; it only moves forward, in the
-- transaction that inserts the slot's jobs, under `SELECT ... FOR UPDATE` of this row.
CREATE TABLE almanac.schedules (
    task              text        PRIMARY KEY,
    cron              text        NOT NULL,
    zone              text        NOT NULL,
    catch_up          text        NOT NULL DEFAULT 'all',
    generated_through timestamptz NOT NULL,
    paused            boolean     NOT NULL DEFAULT false,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One row per unit of work. The primary key is the work's stable identity, so enqueuing
-- it twice is a no-op (`ON CONFLICT DO NOTHING`).
CREATE TABLE almanac.jobs (
    task          text        NOT NULL,
    slot          timestamptz NOT NULL,
    key           text        NOT NULL,
    status        text        NOT NULL DEFAULT 'pending'
                              CHECK (status IN ('pending', 'done', 'failed')),
    attempts      integer     NOT NULL DEFAULT 0,
    run_after     timestamptz NOT NULL DEFAULT now(),
    payload       jsonb,
    last_error    text,
    plugin_digest text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz,
    PRIMARY KEY (task, slot, key)
);

-- Claims read only this index: it holds pending rows alone, in claim order, so the cost
-- of a claim does not grow with the number of done rows kept for dedupe.
CREATE INDEX jobs_pending ON almanac.jobs (run_after, slot, task, key)
    WHERE status = 'pending';

-- The per-slot ledger: "was this slot ever generated, and if not, why not?"
CREATE TABLE almanac.slots (
    task         text        NOT NULL,
    slot         timestamptz NOT NULL,
    status       text        NOT NULL CHECK (status IN ('generated', 'skipped')),
    reason       text,
    jobs         bigint      NOT NULL DEFAULT 0,
    generated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, slot)
);

-- Plugins as last loaded by any host.
CREATE TABLE almanac.plugins (
    name      text        PRIMARY KEY,
    digest    text        NOT NULL,
    version   text        NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now()
);

-- Wake idle workers when jobs arrive. Statement-level, so a bulk insert of a million
-- jobs sends one notification, not a million.
CREATE FUNCTION almanac.notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('almanac_jobs', '');
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_notify AFTER INSERT ON almanac.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION almanac.notify_jobs();
