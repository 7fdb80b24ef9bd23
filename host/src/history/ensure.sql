-- The month partitions of almanac.jobs from the month of $1 to that of $2, created where
-- missing (almanac.add_job_partition: none outside its window); returns their names.
SELECT almanac.add_job_partition(m)
FROM generate_series(date_trunc('month', $1::timestamptz, 'UTC'), $2::timestamptz, interval '1 month') AS m
