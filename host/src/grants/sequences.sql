-- The sequences behind a table's serial columns (what the host grants a writer USAGE
-- on; an identity column's needs none): each with its column, its owner, and whether $2 holds USAGE WITH
-- GRANT OPTION on it.
SELECT pg_catalog.format('%I.%I', sn.nspname, s.relname), a.attname::text, pg_catalog.pg_get_userbyid(s.relowner)::text,
       pg_catalog.has_sequence_privilege($2, s.oid, 'USAGE WITH GRANT OPTION')
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_class s ON s.oid = d.objid
JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.refobjid = pg_catalog.to_regclass($1)
  AND s.relkind = 'S' AND d.deptype = 'a'
ORDER BY 1
