-- What changed a schedule after the revision a host knew, oldest first.
SELECT action, before, after, by_role, origin, reason, at, revision
FROM almanac.changes
WHERE task = $1 AND revision > $2
ORDER BY id
