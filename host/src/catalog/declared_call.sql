-- A function ($1 schema, $2 name) or operator a plugin declares in `calls`, as the
-- catalog has it: each overload's signature, volatility, whether it runs with its
-- owner's rights (SECURITY DEFINER) and the extension that owns it, if any.
SELECT p.oid::regprocedure::text AS signature,
       CASE p.provolatile WHEN 'i' THEN 'immutable' WHEN 's' THEN 'stable' ELSE 'volatile' END AS volatility,
       p.prosecdef AS security_definer,
       (SELECT e.extname::text FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
         WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e' LIMIT 1) AS extension
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname = $2
UNION ALL
-- An operator is its function's call.
SELECT o.oid::regoperator::text,
       CASE p.provolatile WHEN 'i' THEN 'immutable' WHEN 's' THEN 'stable' ELSE 'volatile' END,
       p.prosecdef,
       (SELECT e.extname::text FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
         WHERE d.classid = 'pg_catalog.pg_operator'::regclass AND d.objid = o.oid AND d.deptype = 'e' LIMIT 1)
FROM pg_catalog.pg_operator o
JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace
JOIN pg_catalog.pg_proc p ON p.oid = o.oprcode
WHERE n.nspname = $1 AND o.oprname = $2
ORDER BY 1
