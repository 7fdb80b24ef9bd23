-- What a running host keeps ready: the month partitions from the oldest cursor (a host
-- back after weeks generates the slots it missed) or last month, whichever is older, to
-- three months ahead (enqueues for the coming weeks land in their month, not the default).
SELECT almanac.add_job_partition(m)
FROM generate_series(
    date_trunc('month', least(now() - interval '1 month', (SELECT min(generated_through) FROM ONLY almanac.schedules)), 'UTC'),
    now() + interval '3 months',
    interval '1 month') AS m
