-- A record from before settings existed (NULL) takes the first starting host's, recorded.
WITH adopted AS (
    UPDATE ONLY almanac.schedules s
    SET settings = $2, revision = s.revision + 1, updated_at = now()
    WHERE s.task = $1 AND s.settings IS NULL
    RETURNING s.revision
)
INSERT INTO almanac.changes (task, revision, action, before, after, origin, reason)
SELECT $1, adopted.revision, 'register', jsonb_build_object('settings', NULL), jsonb_build_object('settings', $2::jsonb), $3,
       'settings recorded for the first time'
FROM adopted
