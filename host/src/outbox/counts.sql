-- Messages per publishing task and status, for `almanac status`: pending and dead through
-- their partial indexes, delivered from almanac.delivered_counts (never the history).
WITH waiting AS (
    SELECT task,
           count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'dead')    AS dead
    FROM ONLY almanac.outbox
    WHERE status IN ('pending', 'dead')
    GROUP BY task
), delivered AS (
    SELECT task, sum(delivered)::bigint AS delivered FROM almanac.delivered_counts GROUP BY task
)
SELECT coalesce(w.task, d.task), coalesce(w.pending, 0), coalesce(w.dead, 0), coalesce(d.delivered, 0)
FROM waiting w
-- A message written some other way has no task (NULL); no task is named ''.
FULL JOIN delivered d ON coalesce(d.task, '') = coalesce(w.task, '')
