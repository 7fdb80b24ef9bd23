-- Messages for `almanac outbox` and the console, newest first; $1 status and $2 topic
-- filter when set, $4 pages: only messages older (by id) than it.
SELECT id, topic, key, status, attempts, task, content_type, octet_length(payload)::bigint,
       substring(payload FROM 1 FOR 200) AS preview,
       created_at, next_attempt_at, dispatched_at, left(last_error, 4096) AS last_error
FROM almanac.outbox
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR topic = $2)
  AND ($4::bigint IS NULL OR id < $4)
ORDER BY id DESC
LIMIT $3
