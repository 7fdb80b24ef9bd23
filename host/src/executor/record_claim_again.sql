-- A batch's claim as record_claim.sql wrote it ($8 the server run it was made on), written
-- again by its host after the database dropped the connection ($1 pid, $2 backend_start)
-- under it: a server crash takes the claims committed in the WAL writer's last moments
-- with it. Marked interrupted: the sweep tells a crash from a restart by $8.
INSERT INTO almanac.claims AS c (pid, backend_start, host, tasks, slots, keys, attempts, incarnation, interrupted)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, true)
ON CONFLICT (pid, backend_start) DO UPDATE SET interrupted = true
