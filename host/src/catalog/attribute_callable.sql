-- Names of the database's own functions that attribute notation can call: PostgreSQL
-- reads `x.name` as `name(x)` when x has no column so named, for a function taking one
-- argument. The host's and the system's schemas are left out (their functions are the
-- allowlist's, or unreachable to plugins).
SELECT DISTINCT p.proname::text
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'almanac', 'almanac_job')
  AND n.nspname NOT LIKE 'pg\_%'
  AND p.prokind = 'f' AND p.pronargs >= 1 AND p.pronargs - p.pronargdefaults <= 1
