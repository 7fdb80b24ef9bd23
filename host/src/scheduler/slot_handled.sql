-- Does the ledger key a period of task $1 under instant $2 (generated, skipped or
-- enqueued into)? `apply` asks it of the cursor, `almanac enqueue` of a --slot that is
-- not on the current calendar.
SELECT EXISTS (SELECT 1 FROM almanac.slots WHERE task = $1 AND slot = $2)
