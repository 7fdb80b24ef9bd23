-- Who last set a schedule, for a host whose file disagrees with it.
SELECT action, by_role, origin, at
FROM almanac.changes
WHERE task = $1 AND action IN ('register', 'apply')
ORDER BY id DESC
LIMIT 1
