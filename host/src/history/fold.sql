-- One host at a time folds the counters' appended rows (done jobs, delivered messages)
-- into one row per key; the others skip (the row is free again when this transaction
-- ends). A row lock of a host table, not an advisory key a plugin could hold.
WITH turn AS (SELECT 1 FROM almanac.host_locks WHERE name = 'fold_counts' FOR UPDATE SKIP LOCKED)
SELECT almanac.fold_counts() FROM turn
