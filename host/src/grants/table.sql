-- A declared table as the host's role $2 sees it (its search_path resolves $1): the
-- name with its schema, its schema, the table's owner, and whether $2 holds read and write privileges
-- WITH GRANT OPTION (an owner holds them all).
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname), n.nspname::text, pg_catalog.pg_get_userbyid(c.relowner)::text,
       pg_catalog.has_table_privilege($2, c.oid, 'SELECT WITH GRANT OPTION'),
       pg_catalog.has_table_privilege($2, c.oid, 'INSERT WITH GRANT OPTION')
           AND pg_catalog.has_table_privilege($2, c.oid, 'UPDATE WITH GRANT OPTION')
           AND pg_catalog.has_table_privilege($2, c.oid, 'DELETE WITH GRANT OPTION')
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = pg_catalog.to_regclass($1) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
