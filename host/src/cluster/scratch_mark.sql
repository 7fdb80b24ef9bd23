-- The mark `almanac scratch` leaves on a database it made ($1): it drops only databases
-- that carry it (or do not exist), never the cluster's own or the demo's.
SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1
