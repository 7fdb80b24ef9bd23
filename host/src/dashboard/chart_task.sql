-- Task $1's jobs done and failed, and the longest the oldest due job had waited, in bars
-- of $3 seconds from $2: the per-minute counters' folded rows and the deltas since
-- (almanac.task_minutes, V30), each through its partial index.
SELECT date_bin(make_interval(secs => $3::float8), minute, $2::timestamptz) AS at,
       sum(done)::bigint, sum(failed)::bigint, max(waited)
FROM (SELECT minute, done, failed, waited FROM almanac.task_minutes WHERE folded AND task = $1 AND minute >= $2::timestamptz
      UNION ALL
      SELECT minute, done, failed, waited FROM almanac.task_minutes WHERE NOT folded AND task = $1 AND minute >= $2::timestamptz) counted
GROUP BY 1
