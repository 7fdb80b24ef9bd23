-- The baseline of almanac.enqueue: the same row, inserted directly (its period, $4,
-- named by the caller).
INSERT INTO almanac.jobs (task, slot, key, run_after, period)
VALUES ($1, $2, $3, greatest(now(), $2), $4)
ON CONFLICT (task, slot, key) DO NOTHING
