-- What a running host keeps ready: the month partitions from the oldest cursor (a host
-- back after weeks generates the slots it missed) or last month, whichever is older, to
-- next month (every claim's plan holds the months ahead, so no more than one).
SELECT almanac.add_job_partition(m)
FROM generate_series(
    date_trunc('month', least(now() - interval '1 month', (SELECT min(generated_through) FROM ONLY almanac.schedules)), 'UTC'),
    now() + interval '1 month',
    interval '1 month') AS m
UNION ALL
-- And the outbox's: messages are written now, so this month and the next.
SELECT almanac.add_outbox_partition(m)
FROM generate_series(date_trunc('month', now(), 'UTC'), now() + interval '1 month', interval '1 month') AS m
