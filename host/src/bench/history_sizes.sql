-- Bytes of almanac.jobs (every partition, heap and indexes), its dead tuples as the
-- statistics last saw them, and when autovacuum last finished on the partition holding
-- the most of them.
SELECT coalesce(sum(pg_total_relation_size(t.relid)), 0)::bigint,
       coalesce(sum(s.n_dead_tup), 0)::bigint,
       (SELECT s2.last_autovacuum FROM pg_partition_tree('almanac.jobs') t2
          JOIN pg_stat_user_tables s2 ON s2.relid = t2.relid
         ORDER BY s2.n_dead_tup DESC LIMIT 1)
FROM pg_partition_tree('almanac.jobs') t
LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid
WHERE t.isleaf
