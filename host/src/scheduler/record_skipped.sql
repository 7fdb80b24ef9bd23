-- The slot ledger: a slot the catch-up policy skipped, with the reason. Never overrides
-- a slot that was generated (e.g. by a backfill).
INSERT INTO almanac.slots (task, slot, status, reason, jobs)
VALUES ($1, $2, 'skipped', $3, 0)
ON CONFLICT (task, slot) DO NOTHING
