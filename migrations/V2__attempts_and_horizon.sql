-- Every failed attempt, kept when an operator retries the job (which resets
-- jobs.attempts so the job gets its full number of attempts again).
CREATE TABLE almanac.attempts (
    id            bigserial   PRIMARY KEY,
    task          text        NOT NULL,
    slot          timestamptz NOT NULL,
    key           text        NOT NULL,
    attempt       integer     NOT NULL,
    error         text        NOT NULL,
    plugin_digest text,
    failed_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attempts_job ON almanac.attempts (task, slot, key);

-- Times an operator sent a failed job back to pending.
ALTER TABLE almanac.jobs ADD COLUMN retries integer NOT NULL DEFAULT 0;

-- How far back a backfill may reach for this task. Done jobs younger than this are the
-- dedupe evidence such a backfill relies on, so `almanac prune` refuses to delete them.
ALTER TABLE almanac.schedules ADD COLUMN horizon interval NOT NULL DEFAULT interval '30 days';
