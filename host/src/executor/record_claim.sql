-- What the connection ($1 pid, $2 backend_start) holds from now on: committed before
-- the batch runs, so a host that dies mid-batch leaves this row behind; with the run of
-- the server it is made on, read here and not once per connection: through a pooler a
-- client's connection outlives the server's run.
INSERT INTO almanac.claims AS c (pid, backend_start, host, tasks, slots, keys, attempts, incarnation)
VALUES ($1, $2, $3, $4, $5, $6, $7, almanac.server_incarnation())
ON CONFLICT (pid, backend_start) DO UPDATE
SET host = EXCLUDED.host, claimed_at = now(), tasks = EXCLUDED.tasks, slots = EXCLUDED.slots,
    keys = EXCLUDED.keys, attempts = EXCLUDED.attempts, incarnation = EXCLUDED.incarnation, interrupted = false
