-- A dry run (`almanac try`, `almanac plan`) runs the tried file under a login of its own,
-- made for that one dry run and dropped after it, never under the live task's role: a
-- dry run of another build granted its tables to the live role (and took the live
-- version's away) while it printed "nothing was kept". Recorded here, so that the
-- functions of schema almanac_job know its task (an outbox message it publishes is the
-- task's), and so that the leftovers of a dry run that never finished are dropped by the
-- next one.
CREATE TABLE almanac.dry_logins (
    login   text PRIMARY KEY,
    task    text NOT NULL,
    made_at timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION almanac.session_task() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mine text;
BEGIN
    SELECT l.task INTO mine FROM almanac.plugin_logins l WHERE l.login = session_user::text;
    IF mine IS NULL THEN
        SELECT d.task INTO mine FROM almanac.dry_logins d WHERE d.login = session_user::text;
    END IF;
    IF mine IS NULL THEN
        RAISE EXCEPTION 'almanac_job: session user % is no plugin''s login', session_user USING ERRCODE = '42501';
    END IF;
    RETURN mine;
END $$;
