-- One host at a time folds the counters' appended rows (done jobs, delivered messages)
-- into one row per key; the others skip (the lock is free again when this transaction ends).
SELECT almanac.fold_counts() WHERE pg_try_advisory_xact_lock(hashtext('almanac.fold_counts'))
