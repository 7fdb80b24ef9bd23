-- The ledger of periods: period $4 the catch-up policy skipped (under revision $5), with
-- the reason. Never overrides a period that was generated or enqueued into.
INSERT INTO almanac.slots (task, slot, status, reason, jobs, period, revision)
VALUES ($1, $2, 'skipped', $3, 0, $4, $5)
ON CONFLICT (task, period) DO NOTHING
