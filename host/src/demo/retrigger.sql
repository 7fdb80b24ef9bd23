-- A duplicate trigger: every account's job of task $1, slot $2, again.
INSERT INTO almanac.jobs (task, slot, key) SELECT $1, $2, id::text FROM accounts ON CONFLICT DO NOTHING
