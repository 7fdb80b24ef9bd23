-- Topic $1's messages delivered and dead, in bars of $3 seconds from $2 (almanac.
-- topic_minutes, V30, each part through its partial index); a topic has no wait (0).
SELECT date_bin(make_interval(secs => $3::float8), minute, $2::timestamptz) AS at,
       sum(delivered)::bigint, sum(dead)::bigint, 0::float8
FROM (SELECT minute, delivered, dead FROM almanac.topic_minutes WHERE folded AND topic = $1 AND minute >= $2::timestamptz
      UNION ALL
      SELECT minute, delivered, dead FROM almanac.topic_minutes WHERE NOT folded AND topic = $1 AND minute >= $2::timestamptz) counted
GROUP BY 1
