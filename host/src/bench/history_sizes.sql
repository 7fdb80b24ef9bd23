-- Bytes of almanac.jobs (every partition, heap and indexes), its dead tuples as the
-- statistics last saw them, and when autovacuum last finished on any partition.
SELECT coalesce(sum(pg_total_relation_size(t.relid)), 0)::bigint,
       coalesce(sum(s.n_dead_tup), 0)::bigint,
       max(s.last_autovacuum)
FROM pg_partition_tree('almanac.jobs') t
LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid
WHERE t.isleaf
