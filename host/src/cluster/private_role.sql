-- The role a host connects as on the private cluster, as deployed for real: an ordinary
-- role that may create roles and owns its database (so it creates and owns schema
-- almanac), not a superuser.
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'almanac_host') THEN
        CREATE ROLE almanac_host LOGIN CREATEROLE;
    END IF;
END $$
