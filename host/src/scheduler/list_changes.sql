-- `almanac changes` and the console: the deliberate changes, newest first; $1 task and
-- $2 topic narrow them when set, $4 (an id) starts after the page that ended there.
SELECT id, task, topic, revision, action, before, after, by_role, origin, reason, at
FROM almanac.changes
WHERE ($1::text IS NULL OR task = $1) AND ($2::text IS NULL OR topic = $2) AND ($4::bigint IS NULL OR id < $4)
ORDER BY id DESC
LIMIT $3
