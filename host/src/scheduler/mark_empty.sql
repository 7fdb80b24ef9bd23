-- Period $2 of task $1 was planned and its plan returned no keys: `empty` in the ledger
-- (migrations/V23__business_calendars.sql).
UPDATE almanac.slots SET status = 'empty' WHERE task = $1 AND period = $2
