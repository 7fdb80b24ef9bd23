-- The database dropped the connection ($1 pid, $2 backend_start) under its batch, and
-- its host lives on: the orphan is an interruption, not a crash (sweep_claims.sql).
UPDATE almanac.claims SET interrupted = true WHERE pid = $1 AND backend_start = $2
