-- The database's name and owner, the host's role ($1, else the connected one), whether
-- it may CREATE (schemas) in the database, and its CREATEROLE and superuser attributes.
SELECT pg_catalog.current_database()::text, pg_catalog.pg_get_userbyid(d.datdba)::text,
       pg_catalog.has_database_privilege(r.rolname, d.oid, 'CREATE'), r.rolcreaterole, r.rolsuper, r.rolname::text
FROM pg_catalog.pg_database d, pg_catalog.pg_roles r
WHERE d.datname = pg_catalog.current_database() AND r.rolname = coalesce($1, current_user)
