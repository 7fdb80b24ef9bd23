-- Was this slot generated or skipped (is the cursor a slot the schedule handled)?
SELECT EXISTS (SELECT 1 FROM almanac.slots WHERE task = $1 AND slot = $2)
