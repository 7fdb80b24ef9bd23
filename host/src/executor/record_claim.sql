-- What the connection ($1 pid, $2 backend_start) holds from now on: committed before
-- the batch runs, so a host that dies mid-batch leaves this row behind.
INSERT INTO almanac.claims AS c (pid, backend_start, host, tasks, slots, keys, attempts)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (pid, backend_start) DO UPDATE
SET host = EXCLUDED.host, claimed_at = now(), tasks = EXCLUDED.tasks, slots = EXCLUDED.slots,
    keys = EXCLUDED.keys, attempts = EXCLUDED.attempts
