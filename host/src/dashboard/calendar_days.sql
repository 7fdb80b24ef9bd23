-- Task $1's periods keyed from $2 to $3, per day in zone $4: what the ledger says of them
-- (generated, empty, skipped and why, enqueued into) and where their jobs stand, from the
-- periods' counters (almanac.slot_counts: the folded row of each period and the deltas
-- appended since), never from the jobs themselves.
WITH ledger AS (
    SELECT (slot AT TIME ZONE $4)::date AS day,
           count(*) FILTER (WHERE status = 'generated') AS generated,
           count(*) FILTER (WHERE status = 'empty') AS empty,
           count(*) FILTER (WHERE status = 'skipped') AS skipped,
           count(*) FILTER (WHERE status = 'enqueued') AS enqueued,
           min(reason) FILTER (WHERE status = 'skipped') AS reason
    FROM almanac.slots
    WHERE task = $1 AND slot >= $2 AND slot < $3
    GROUP BY 1
), jobs AS (
    SELECT (slot AT TIME ZONE $4)::date AS day,
           sum(pending + done + failed + discarded)::bigint AS total, sum(done)::bigint AS done,
           sum(pending)::bigint AS pending, sum(failed)::bigint AS failed, sum(discarded)::bigint AS discarded
    FROM (SELECT slot, pending, done, failed, discarded FROM almanac.slot_counts
          WHERE folded AND task = $1 AND slot >= $2 AND slot < $3
          UNION ALL
          SELECT slot, pending, done, failed, discarded FROM almanac.slot_counts
          WHERE NOT folded AND task = $1 AND slot >= $2 AND slot < $3) counted
    GROUP BY 1
)
SELECT day::text,
       coalesce(l.generated, 0), coalesce(l.empty, 0), coalesce(l.skipped, 0), coalesce(l.enqueued, 0), l.reason,
       coalesce(j.total, 0), coalesce(j.done, 0), coalesce(j.pending, 0), coalesce(j.failed, 0), coalesce(j.discarded, 0)
FROM ledger l FULL JOIN jobs j USING (day)
