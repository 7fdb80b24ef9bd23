-- The outbox's month partitions, oldest first.
SELECT p.partition::text, p.first, p.next
FROM almanac.outbox_partitions p
ORDER BY p.first
