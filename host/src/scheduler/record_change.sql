-- One deliberate change, in the transaction that made it.
INSERT INTO almanac.changes (task, revision, action, before, after, origin, reason)
VALUES ($1, $2, $3, $4, $5, $6, $7)
