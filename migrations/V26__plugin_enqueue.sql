-- Plugins enqueue (WIT 0.4.0 `jobs.enqueue`): one job of another task, in the calling
-- job's transaction, by the same identity rules as almanac.enqueue (it is called). The
-- right is per task and the database's to check, as a client's is: the host writes a row
-- of almanac.enqueue_grants for the plugin's role and each task its describe() names in
-- `enqueues`, at every load (access::grant_enqueues); its login is a member of that role.
-- Plugin roles get EXECUTE on it with the rest of schema almanac_job at their next load.
CREATE FUNCTION almanac_job.enqueue(task text, slot timestamptz, key text, payload jsonb, run_after timestamptz)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text := almanac.session_task();
BEGIN
    IF NOT EXISTS (SELECT 1 FROM almanac.enqueue_grants g
                   WHERE g.task = enqueue.task AND pg_catalog.pg_has_role(session_user, g.grantee, 'USAGE')) THEN
        RAISE EXCEPTION 'task "%" may not enqueue into task "%": declare it in describe() (enqueues), and the host grants it at load', mine, enqueue.task
            USING ERRCODE = '42501';
    END IF;
    RETURN almanac.enqueue(enqueue.task, enqueue.slot, enqueue.key, enqueue.payload, enqueue.run_after, false);
END $$;
REVOKE ALL ON FUNCTION almanac_job.enqueue(text, timestamptz, text, jsonb, timestamptz) FROM PUBLIC;
