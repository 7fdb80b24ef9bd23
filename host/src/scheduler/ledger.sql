-- The ledger's rows of task $1 for periods $2 or keyed at instants $3: where each is
-- keyed, its status, why, and the schedule revision it was handled under.
SELECT period, slot, status, reason, revision
FROM almanac.slots
WHERE task = $1 AND (period = ANY($2::text[]) OR slot = ANY($3::timestamptz[]))
