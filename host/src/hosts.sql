-- One host's heartbeat ($1 id, $2 version, $3 started, $4 workers, $5 busy, $6 plugins,
-- $7 concurrency), and the rows of hosts quiet for a day go.
WITH beat AS (
    INSERT INTO almanac.hosts (id, version, started_at, seen_at, workers, busy, plugins, concurrency)
    VALUES ($1, $2, $3, now(), $4, $5, $6, $7)
    ON CONFLICT (id, started_at) DO UPDATE
       SET version = EXCLUDED.version, seen_at = EXCLUDED.seen_at, workers = EXCLUDED.workers,
           busy = EXCLUDED.busy, plugins = EXCLUDED.plugins, concurrency = EXCLUDED.concurrency
)
DELETE FROM almanac.hosts WHERE seen_at < now() - interval '1 day' AND (id, started_at) <> ($1, $3)
