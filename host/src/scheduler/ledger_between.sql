-- How many periods of task $1 the ledger keys at instants from $2 to $3 (excluded).
SELECT count(*) FROM almanac.slots WHERE task = $1 AND slot >= $2 AND slot < $3
