-- A backfill of task $1 done (`almanac backfill`, the console): $2 its range and what it
-- generated, $3 who from where, $4 why.
INSERT INTO almanac.changes (task, revision, action, after, origin, reason)
SELECT $1, s.revision, 'backfill', $2::jsonb, $3, $4 FROM ONLY almanac.schedules s WHERE s.task = $1
