-- The slot ledger: generated (with its job count) or skipped (with the reason).
INSERT INTO almanac.slots (task, slot, status, reason, jobs)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (task, slot) DO NOTHING
