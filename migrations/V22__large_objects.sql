-- Large objects a plugin's session made (through a function it declared: lo_* itself is
-- never callable) outlived a committed job for good. After each transaction the host
-- unlinks those its login or its task's role owns (host/src/login.rs, CLEAN), through
-- this function: owners by direct membership only (never an application role the task
-- role may have been granted), and an object another session of the task unlinked first
-- is no error (an error here would cut the rest of the clean-up short after a commit).
CREATE FUNCTION almanac_job.unlink_large_objects() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o oid;
BEGIN
    FOR o IN SELECT l.oid FROM pg_catalog.pg_largeobject_metadata l
             WHERE l.lomowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = session_user)
                OR l.lomowner IN (SELECT m.roleid FROM pg_catalog.pg_auth_members m
                                  JOIN pg_catalog.pg_roles r ON r.oid = m.member WHERE r.rolname = session_user)
    LOOP
        BEGIN
            PERFORM pg_catalog.lo_unlink(o);
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION almanac_job.unlink_large_objects() FROM PUBLIC;
-- Hosts grant the plugins' roles EXECUTE on schema almanac_job's functions at each load.
