-- Messages per publishing task and status, for `almanac status`.
SELECT task,
       count(*) FILTER (WHERE status = 'pending')   AS pending,
       count(*) FILTER (WHERE status = 'dead')      AS dead,
       count(*) FILTER (WHERE status = 'delivered') AS delivered
FROM ONLY almanac.outbox
GROUP BY task
