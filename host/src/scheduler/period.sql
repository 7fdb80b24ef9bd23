-- The ledger's row for the slot at $3, of period $2 (as the current calendar names it)
-- of task $1: the row keyed at that very instant (under whatever name an older calendar
-- gave it: the instant is that period's), else the period's row; none for a period not
-- handled yet.
(SELECT slot, status, revision, period FROM almanac.slots WHERE task = $1 AND slot = $3)
UNION ALL
(SELECT slot, status, revision, period FROM almanac.slots WHERE task = $1 AND period = $2)
LIMIT 1
