-- Generation's baseline: the slot after the generated one, its jobs straight from the
-- accounts with no plan(), no paging, no plugin.
INSERT INTO almanac.jobs (task, slot, key, period)
SELECT 'daily-points', '2026-03-09T16:00:00Z', id::text, '2026-03-10' FROM accounts
