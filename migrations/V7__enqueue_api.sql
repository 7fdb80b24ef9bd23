-- Applications hand work to Almanac in their own transactions, from any language:
--   SELECT almanac.enqueue('send-receipt', '2026-12-03T09:00Z', 'order-42', '{"order": 42}');
-- The functions run as their owner (SECURITY DEFINER, search_path pinned), so a caller
-- needs EXECUTE on them and nothing else: role `almanac_client` holds exactly that, and an
-- application's login role is granted it. A rollback of the caller's transaction leaves
-- no job; the statement-level trigger on almanac.jobs notifies idle hosts, and PostgreSQL
-- folds identical notifications of one transaction into one.

-- What the database checks a slot against (see host/src/calendar/published.rs): the
-- matching seconds, minutes, hours and local days around now, published by the hosts.
ALTER TABLE almanac.schedules ADD COLUMN calendar jsonb;

-- An on-demand task (its plugin declares no schedule) has a row without a cron: its
-- jobs come only from enqueues, for any instant.
ALTER TABLE almanac.schedules ALTER COLUMN cron DROP NOT NULL;

-- The task's settings as applied (`[tasks.<name>.settings]`): values, and digests of
-- secrets read from a host's environment. One truth across hosts, like the schedule.
-- NULL until a host records them: the first host to start after this migration records
-- its own (the plugins declared no settings before).
ALTER TABLE almanac.schedules ADD COLUMN settings jsonb;

-- Refusals carry a SQLSTATE an application can branch on: 22004 (a NULL argument),
-- 22023 (an invalid value: empty or oversized key, a slot off the calendar), 42704 (no
-- such task).
CREATE FUNCTION almanac.check_enqueue(task text, slot timestamptz, off_calendar boolean)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s record;
    wall timestamp;
BEGIN
    IF task IS NULL THEN
        RAISE EXCEPTION 'almanac.enqueue: task must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF slot IS NULL THEN
        RAISE EXCEPTION 'almanac.enqueue: slot must not be NULL (the start of the business period the job belongs to)'
            USING ERRCODE = '22004';
    END IF;
    SELECT sc.cron, sc.zone, sc.calendar INTO s FROM ONLY almanac.schedules sc WHERE sc.task = check_enqueue.task;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'almanac.enqueue: no task "%": no host has registered it', task
            USING ERRCODE = '42704',
                  HINT = 'known tasks: ' || coalesce((SELECT string_agg(sc.task, ', ' ORDER BY sc.task) FROM ONLY almanac.schedules sc), 'none');
    END IF;
    IF s.cron IS NULL OR off_calendar OR EXISTS (SELECT 1 FROM almanac.slots sl WHERE sl.task = check_enqueue.task AND sl.slot = check_enqueue.slot) THEN
        RETURN;
    END IF;
    IF s.calendar IS NULL THEN
        RAISE EXCEPTION 'almanac.enqueue: the calendar of task "%" is not published yet (a running host publishes it within a tick)', task
            USING ERRCODE = '55000', HINT = 'retry shortly, or pass off_calendar => true';
    END IF;
    wall := slot AT TIME ZONE s.zone;
    IF wall::date < (s.calendar->>'from')::date OR wall::date > (s.calendar->>'to')::date THEN
        RAISE EXCEPTION 'almanac.enqueue: slot % is outside the calendar window the database holds for task "%" (% to %)',
            slot, task, s.calendar->>'from', s.calendar->>'to'
            USING ERRCODE = '22023', HINT = 'pass off_calendar => true to enqueue it anyway';
    END IF;
    IF NOT (extract(microseconds FROM wall)::bigint % 1000000 = 0
            AND s.calendar->'seconds' @> to_jsonb(extract(second FROM wall)::int)
            AND s.calendar->'minutes' @> to_jsonb(extract(minute FROM wall)::int)
            AND s.calendar->'hours' @> to_jsonb(extract(hour FROM wall)::int)
            AND s.calendar->'days' @> to_jsonb(to_char(wall, 'YYYY-MM-DD'))) THEN
        RAISE EXCEPTION 'almanac.enqueue: slot % (% in %) is not on task "%"''s calendar (cron "%")',
            slot, to_char(wall, 'YYYY-MM-DD HH24:MI:SS'), s.zone, task, s.cron
            USING ERRCODE = '22023',
                  HINT = 'a slot is the start of a period of the schedule; `almanac slots ' || task || ' --from ... --to ...` lists them. Pass off_calendar => true to enqueue it anyway';
    END IF;
END $$;

CREATE FUNCTION almanac.check_key(key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'almanac.enqueue: key must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF key = '' THEN
        RAISE EXCEPTION 'almanac.enqueue: key must not be empty' USING ERRCODE = '22023';
    END IF;
    IF octet_length(key) > 1024 THEN
        RAISE EXCEPTION 'almanac.enqueue: a key of % bytes; the limit is 1024', octet_length(key) USING ERRCODE = '22023';
    END IF;
END $$;

-- One job; true if it was created, false if (task, slot, key) existed (a no-op). It does
-- not run before run_after (default now) nor before its slot starts.
CREATE FUNCTION almanac.enqueue(task text, slot timestamptz, key text, payload jsonb DEFAULT NULL,
                                run_after timestamptz DEFAULT NULL, off_calendar boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM almanac.check_enqueue(enqueue.task, enqueue.slot, coalesce(enqueue.off_calendar, false));
    PERFORM almanac.check_key(enqueue.key);
    INSERT INTO almanac.jobs (task, slot, key, payload, run_after)
    VALUES (enqueue.task, enqueue.slot, enqueue.key, enqueue.payload, greatest(coalesce(enqueue.run_after, now()), enqueue.slot))
    ON CONFLICT (task, slot, key) DO NOTHING;
    RETURN FOUND;
END $$;

-- Many jobs of one slot; returns how many were created (keys that existed, or repeat in
-- the array, are no-ops). One statement: one trigger, one notification.
CREATE FUNCTION almanac.enqueue_many(task text, slot timestamptz, keys text[], payload jsonb DEFAULT NULL,
                                     off_calendar boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    bad text;
    created integer;
BEGIN
    PERFORM almanac.check_enqueue(enqueue_many.task, enqueue_many.slot, coalesce(enqueue_many.off_calendar, false));
    IF keys IS NULL THEN
        RAISE EXCEPTION 'almanac.enqueue_many: keys must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT k INTO bad FROM unnest(keys) k WHERE k IS NULL OR k = '' OR octet_length(k) > 1024 LIMIT 1;
    IF FOUND THEN
        PERFORM almanac.check_key(bad);
    END IF;
    INSERT INTO almanac.jobs (task, slot, key, payload, run_after)
    SELECT enqueue_many.task, enqueue_many.slot, k, enqueue_many.payload, greatest(now(), enqueue_many.slot)
    FROM unnest(keys) k
    ON CONFLICT (task, slot, key) DO NOTHING;
    GET DIAGNOSTICS created = ROW_COUNT;
    RETURN created;
END $$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'almanac_client') THEN
        CREATE ROLE almanac_client NOLOGIN;
    END IF;
END $$;

REVOKE ALL ON FUNCTION almanac.check_enqueue(text, timestamptz, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION almanac.check_key(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION almanac.enqueue(text, timestamptz, text, jsonb, timestamptz, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION almanac.enqueue_many(text, timestamptz, text[], jsonb, boolean) FROM PUBLIC;
GRANT USAGE ON SCHEMA almanac TO almanac_client;
GRANT EXECUTE ON FUNCTION almanac.enqueue(text, timestamptz, text, jsonb, timestamptz, boolean) TO almanac_client;
GRANT EXECUTE ON FUNCTION almanac.enqueue_many(text, timestamptz, text[], jsonb, boolean) TO almanac_client;
