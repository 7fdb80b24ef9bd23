-- The database's own functions (name, schema, whether it takes one argument), which a
-- plugin's SQL could reach without naming their schema: by attribute notation
-- (PostgreSQL reads `x.name` as `name(x)` when x has no column so named, for a function
-- or aggregate taking one argument), or by an unqualified call of a built-in's name that
-- an overload of the schema's matches better (`public.round(float8, int)` beside
-- `round(numeric, int)`). The host's and the system's schemas are left out (their
-- functions are the allowlist's, or unreachable to plugins).
SELECT p.proname::text, n.nspname::text, p.pronargs >= 1 AND p.pronargs - p.pronargdefaults <= 1
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'almanac', 'almanac_job')
  AND n.nspname NOT LIKE 'pg\_%'
  AND p.prokind IN ('f', 'a', 'w')
