-- One host at a time folds the done counts' deltas into one row per (task, month); the
-- others skip (the lock is free again when this transaction ends).
SELECT almanac.fold_done_counts() WHERE pg_try_advisory_xact_lock(hashtext('almanac.fold_done_counts'))
