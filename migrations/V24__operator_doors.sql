-- The operator's doors, recorded and open to the operator.
--
-- Every deliberate act on the outbox (`almanac outbox pause|resume|deliver-now|discard|
-- retry`) and on jobs (`almanac retry`, `almanac enqueue`) is a row of almanac.changes,
-- like the schedule's changes: who, from where, why. An outbox act names its topic, not a
-- task; `almanac changes` reads them all.
ALTER TABLE almanac.changes ALTER COLUMN task DROP NOT NULL;
ALTER TABLE almanac.changes ADD COLUMN topic text;
ALTER TABLE almanac.changes ADD CONSTRAINT changes_subject CHECK (task IS NOT NULL OR topic IS NOT NULL);
ALTER TABLE almanac.changes DROP CONSTRAINT changes_action_check;
ALTER TABLE almanac.changes ADD CONSTRAINT changes_action_check
    CHECK (action IN ('register', 'apply', 'cursor', 'pause', 'resume', 'forget', 'discard', 'hold', 'release',
                      'retry', 'enqueue', 'settings',
                      'outbox-pause', 'outbox-resume', 'outbox-deliver-now', 'outbox-discard', 'outbox-retry')) NOT VALID;
ALTER TABLE almanac.changes VALIDATE CONSTRAINT changes_action_check;
CREATE INDEX changes_topic ON almanac.changes (topic, id) WHERE topic IS NOT NULL;

-- The tasks the caller may enqueue into (NULL: all). The host's own role (the owner of
-- schema almanac, which runs `almanac enqueue`: the operator's door, or a role that has
-- its privileges) may enqueue into every task without a grant, as a member of
-- almanac_client may.
CREATE OR REPLACE FUNCTION almanac.enqueue_tasks() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN pg_catalog.pg_has_role(session_user, 'almanac_client', 'MEMBER')
                  OR pg_catalog.pg_has_role(session_user, (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'almanac'), 'USAGE')
                THEN NULL
                ELSE coalesce((SELECT array_agg(DISTINCT g.task ORDER BY g.task) FROM almanac.enqueue_grants g
                               WHERE pg_catalog.pg_has_role(session_user, g.grantee, 'MEMBER')), '{}') END
$$;
REVOKE ALL ON FUNCTION almanac.enqueue_tasks() FROM PUBLIC;
