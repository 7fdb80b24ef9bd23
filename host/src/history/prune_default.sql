-- One bounded batch of done or discarded jobs older than $1 from the default partition
-- (slots outside every month partition): the only rows prune deletes one by one. Their
-- done count and attempt history go with them.
WITH gone AS (
    DELETE FROM almanac.jobs_default
    WHERE ctid IN (
        SELECT ctid FROM almanac.jobs_default
        WHERE status IN ('done', 'discarded') AND slot < $1
        LIMIT 10000
    )
    RETURNING task, slot, key, status
), uncounted AS (
    INSERT INTO almanac.done_counts (task, month, done)
    SELECT task, date_trunc('month', slot, 'UTC'), -count(*) FROM gone WHERE status = 'done' GROUP BY 1, 2
), history AS (
    DELETE FROM almanac.attempts a USING gone g WHERE (a.task, a.slot, a.key) = (g.task, g.slot, g.key)
)
SELECT count(*) FROM gone
