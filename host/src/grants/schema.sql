-- A schema's owner, and whether $2 holds USAGE (or everyone does: then the plugins' roles
-- need no grant of it) and CREATE on it WITH GRANT OPTION.
SELECT pg_catalog.pg_get_userbyid(n.nspowner)::text,
       pg_catalog.has_schema_privilege($2, n.oid, 'USAGE WITH GRANT OPTION') OR pg_catalog.has_schema_privilege('public', n.oid, 'USAGE'),
       pg_catalog.has_schema_privilege($2, n.oid, 'CREATE WITH GRANT OPTION')
FROM pg_catalog.pg_namespace n
WHERE n.nspname = $1
