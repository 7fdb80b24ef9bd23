-- The latest instant task $1's ledger keys a period under (a backfill or an enqueue may
-- have gone past the cursor).
SELECT max(slot) FROM almanac.slots WHERE task = $1
