-- The month partitions, oldest first, with the jobs a prune would have to keep.
SELECT p.partition::text, p.first, p.next
FROM almanac.job_partitions p
ORDER BY p.first
