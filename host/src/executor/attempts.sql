-- One job's recorded attempts ($1 task, $2 key; $3 one slot, or NULL for the key in every
-- slot), oldest first, at most $4: each failed attempt (`error`), interruption by the
-- database (`transient`) or crash of the host running it (`crash`). A success is not an
-- entry: the job's row says it is done. The host that ran it and the plugin's digest are
-- NULL for attempts recorded before migrations V31 and V10.
SELECT a.slot, a.attempt, a.kind, a.failed_at, a.error, a.host, a.plugin_digest
FROM almanac.attempts a
WHERE a.task = $1 AND a.key = $2 AND ($3::timestamptz IS NULL OR a.slot = $3)
ORDER BY a.slot, a.id
LIMIT $4
