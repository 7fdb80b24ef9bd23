-- The hosts serving this database, as each says every heartbeat (host/src/hosts.rs):
-- what an operator asks first in an outage (which hosts are alive, which plugins each
-- serves, how busy it is), and where a task whose jobs conflict is seen running at a
-- lowered concurrency (host/src/executor/share.rs). A host deletes its row when it
-- stops; one that was killed stays, shown as quiet, until a day after its last beat.
-- A host is its name and pid and when it started: two hosts in containers may share both
-- a hostname and pid 1, and a restarted host reuses neither its start nor its row.
CREATE TABLE almanac.hosts (
    id text NOT NULL,
    version text NOT NULL,
    started_at timestamptz NOT NULL,
    seen_at timestamptz NOT NULL,
    workers int NOT NULL,
    busy int NOT NULL,
    -- [{"task", "version", "digest"}]
    plugins jsonb NOT NULL,
    -- [{"task", "running", "limit", "share"}]: the tasks running or lowered now.
    concurrency jsonb NOT NULL,
    PRIMARY KEY (id, started_at)
);
