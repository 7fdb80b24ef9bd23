-- A duplicate trigger: every account's job of task $1 for the period of instant $2 (an
-- instant other than the one it ran at, as a moved schedule would give), again. Keyed by
-- period, none of them is new.
INSERT INTO almanac.jobs (task, slot, key, period)
SELECT $1, p.slot, a.id::text, p.period FROM almanac.period_slot($1, $2) p, accounts a
ON CONFLICT DO NOTHING
