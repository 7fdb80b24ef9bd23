-- The baseline of almanac.enqueue_many: the same rows, inserted directly (their period,
-- $4, named by the caller).
INSERT INTO almanac.jobs (task, slot, key, run_after, period)
SELECT $1, $2, k, greatest(now(), $2), $4 FROM unnest($3::text[]) k
ON CONFLICT (task, slot, key) DO NOTHING
