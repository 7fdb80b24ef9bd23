-- One bounded batch of done or discarded jobs older than $1 from the default partition
-- (slots outside every month partition): the only rows prune deletes one by one. Their
-- counts and attempt history go with them (a DELETE on the partition itself does not
-- fire almanac.jobs' counting trigger, so the counts, the months' and the periods', are
-- taken here).
WITH gone AS (
    DELETE FROM almanac.jobs_default
    WHERE ctid IN (
        SELECT ctid FROM almanac.jobs_default
        WHERE status IN ('done', 'discarded') AND slot < $1
        LIMIT 10000
    )
    RETURNING task, slot, key, status
), uncounted AS (
    INSERT INTO almanac.job_counts (task, month, done, discarded)
    SELECT task, date_trunc('month', slot, 'UTC'), -count(*) FILTER (WHERE status = 'done'),
           -count(*) FILTER (WHERE status = 'discarded')
    FROM gone GROUP BY 1, 2
), periods AS (
    INSERT INTO almanac.slot_counts (task, slot, done, discarded)
    SELECT task, slot, -count(*) FILTER (WHERE status = 'done'), -count(*) FILTER (WHERE status = 'discarded')
    FROM gone GROUP BY 1, 2
), history AS (
    DELETE FROM almanac.attempts a USING gone g WHERE (a.task, a.slot, a.key) = (g.task, g.slot, g.key)
)
SELECT count(*) FROM gone
