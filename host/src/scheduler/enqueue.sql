-- One job by identity, from an operator: keyed under its period's instant (the ledger's,
-- for a period generated under another calendar), so a second insert of the same
-- (task, period, key) is a no-op, whoever sends it; a slot still to come does not run
-- before it starts.
WITH p AS (SELECT * FROM almanac.period_slot($1, $2))
INSERT INTO almanac.jobs (task, slot, key, payload, run_after, period)
SELECT $1, p.slot, $3, $4, greatest(now(), $2), p.period FROM p
ON CONFLICT DO NOTHING
