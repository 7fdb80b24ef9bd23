-- A schedule is shared by every host, so a change to it is deliberate and recorded:
-- `almanac apply` (cron, zone, catch-up, horizon), `almanac cursor`, `pause`/`resume`
-- and `forget` each write one row here in the transaction that makes the change, and
-- bump the schedule's revision. A host only ever inserts a schedule that does not exist
-- yet (recorded as `register`); one whose file disagrees with the stored schedule does
-- not serve that task. Running hosts see a new revision on their next tick, log the
-- changes since the one they knew and follow the stored schedule.
ALTER TABLE almanac.schedules ADD COLUMN revision bigint NOT NULL DEFAULT 1;

CREATE TABLE almanac.changes (
    id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task     text        NOT NULL,
    -- The schedule's revision after this change (0 once forgotten).
    revision bigint      NOT NULL,
    action   text        NOT NULL CHECK (action IN ('register', 'apply', 'cursor', 'pause', 'resume', 'forget', 'discard')),
    before   jsonb,
    after    jsonb,
    -- Who: the database role, and the command, machine and process that made it.
    by_role  text        NOT NULL DEFAULT session_user,
    origin   text        NOT NULL,
    reason   text,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX changes_task ON almanac.changes (task, id);

-- Schedules that existed before this migration were written by hosts starting; they
-- are the applied truth from now on.
INSERT INTO almanac.changes (task, revision, action, after, origin)
SELECT task, revision, 'register',
       jsonb_build_object('cron', cron, 'zone', zone, 'catch_up', catch_up, 'horizon', horizon::text),
       'migration V6 (schedule as found)'
FROM ONLY almanac.schedules;

-- A job an operator decided must never run: kept (its identity still stops a backfill
-- from creating it again), never claimed, pruned like a done job.
ALTER TABLE almanac.jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE almanac.jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('pending', 'done', 'failed', 'discarded')) NOT VALID;
ALTER TABLE almanac.jobs VALIDATE CONSTRAINT jobs_status_check;
