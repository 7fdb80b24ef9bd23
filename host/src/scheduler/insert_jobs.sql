-- One job per key. The primary key (task, slot, key) makes a second insert of the same
-- identity a no-op, whoever sends it.
INSERT INTO almanac.jobs (task, slot, key)
SELECT $1, $2, k FROM unnest($3::text[]) AS k
ON CONFLICT DO NOTHING
