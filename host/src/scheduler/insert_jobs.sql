-- One job per key, keyed under its period's instant ($2, from the ledger) and named with
-- the period ($4). The primary key makes a second insert of the same identity a no-op,
-- whoever sends it.
INSERT INTO almanac.jobs (task, slot, key, period)
SELECT $1, $2, k, $4 FROM unnest($3::text[]) AS k
ON CONFLICT DO NOTHING
