-- Every host on record, live ones first: seconds since its last beat, and the rest as it said.
SELECT id, version, started_at, extract(epoch FROM now() - seen_at)::float8, workers, busy, plugins, concurrency
FROM almanac.hosts
ORDER BY seen_at < now() - $1 * interval '1 second', id
