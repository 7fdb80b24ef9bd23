-- A plugin version that adds settings, each at its declared default: the stored settings
-- take them ($2; a value already stored wins), recorded ($3 origin, $4 why), with no
-- `almanac apply`: every host running that version holds the same values. Only while
-- none of them is stored ($5 their names), so two hosts starting together add them once.
WITH added AS (
    UPDATE ONLY almanac.schedules s
    SET settings = $2::jsonb || s.settings, revision = s.revision + 1, updated_at = now()
    WHERE s.task = $1 AND NOT (s.settings ?| $5::text[])
    RETURNING s.revision
)
INSERT INTO almanac.changes (task, revision, action, after, origin, reason)
SELECT $1, added.revision, 'settings', jsonb_build_object('settings', $2::jsonb), $3, $4
FROM added
