-- Server crashes are charged to tasks, not only to jobs. Three jobs that each fit in the
-- server's memory alone but not together crashed it once per round for ever: each was
-- marked, ran alone and passed, and nothing counted against the task. Now every crash
-- is charged (once) to every task whose jobs were running when it happened
-- (host/src/executor/sweep_claims.sql), and a task charged --poison-after times within
-- --poison-window is held, as `almanac hold` holds it: recorded in almanac.changes with
-- its reason, shown by status, the dashboard and almanac_tasks_held, ended by
-- `almanac release`.
CREATE TABLE almanac.task_crashes (
    task        text        NOT NULL,
    -- The server run after the crash (almanac.server_incarnation()): one charge per task
    -- per crash, however many claims or hosts saw it.
    incarnation text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, incarnation)
);

-- Why a task is held: the operator's reason, or the crashes that held it.
ALTER TABLE almanac.schedules ADD COLUMN held_reason text;
