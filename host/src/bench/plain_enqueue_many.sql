-- The baseline of almanac.enqueue_many: the same rows, inserted directly.
INSERT INTO almanac.jobs (task, slot, key, run_after)
SELECT $1, $2, k, greatest(now(), $2) FROM unnest($3::text[]) k
ON CONFLICT (task, slot, key) DO NOTHING
