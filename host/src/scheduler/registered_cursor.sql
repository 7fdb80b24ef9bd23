-- The cursor task $1's schedule was registered with (its latest `register` change), so a
-- host can tell the start_at that made the schedule from one given since.
SELECT (c.after->>'cursor')::timestamptz
FROM almanac.changes c
WHERE c.task = $1 AND c.action = 'register'
ORDER BY c.id DESC
LIMIT 1
