-- Poison jobs: a job whose run kills the host (or its connection) leaves no trace in its
-- own transaction, which dies with the host. So before a batch runs, the executor
-- commits, on a connection of its own, which jobs the batch's connection holds
-- (`claims`, one row per worker connection, overwritten per batch). A row whose backend
-- is gone from pg_stat_activity is an orphan: its jobs ended without an outcome.
-- The sweep (executor/claims) counts that on each job still pending: `crashes`, and for
-- a job that was claimed alone also an attempt. A job that was part of a larger batch is
-- marked (crashes >= 1) and runs alone from then on, so a poison job cannot take the
-- jobs it was claimed with down with it; one that reaches the host's limit is failed
-- without running again.
ALTER TABLE almanac.jobs ADD COLUMN crashes integer NOT NULL DEFAULT 0;

CREATE TABLE almanac.claims (
    pid integer NOT NULL,
    backend_start timestamptz NOT NULL,
    host text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    tasks text[] NOT NULL,
    slots timestamptz[] NOT NULL,
    keys text[] NOT NULL,
    attempts integer[] NOT NULL,
    PRIMARY KEY (pid, backend_start)
);
