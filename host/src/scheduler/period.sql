-- The ledger's row of period $2 of task $1: the instant its jobs are keyed under, its
-- status and the revision it was generated under; for a period not in the ledger, the
-- instant it would be keyed under ($3, or the next one no other period holds).
SELECT slot, status, revision FROM almanac.slots WHERE task = $1 AND period = $2
UNION ALL
SELECT almanac.free_slot($1, $3), NULL, NULL
WHERE NOT EXISTS (SELECT 1 FROM almanac.slots WHERE task = $1 AND period = $2)
