-- `almanac changes`: the deliberate changes, newest first; $1 task and $2 topic narrow
-- them when set.
SELECT id, task, topic, revision, action, before, after, by_role, origin, reason, at
FROM almanac.changes
WHERE ($1::text IS NULL OR task = $1) AND ($2::text IS NULL OR topic = $2)
ORDER BY id DESC
LIMIT $3
