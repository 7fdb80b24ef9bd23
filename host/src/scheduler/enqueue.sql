-- One job by identity, from an operator: a slot still to come does not run before it
-- starts; a second insert of the same identity is a no-op, whoever sends it.
INSERT INTO almanac.jobs (task, slot, key, payload, run_after)
VALUES ($1, $2, $3, $4, greatest(now(), $2))
ON CONFLICT DO NOTHING
