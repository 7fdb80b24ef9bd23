-- The baseline of almanac.enqueue: the same row, inserted directly.
INSERT INTO almanac.jobs (task, slot, key, run_after)
VALUES ($1, $2, $3, greatest(now(), $2))
ON CONFLICT (task, slot, key) DO NOTHING
