-- One business period, one effect. A job's identity was (task, slot instant, key); when a
-- schedule's time of day, day of month, weekday or zone changed, the same business period
-- got a new instant and so a new identity, and a backfill billed November a second time.
-- Now each task has a period unit (`slot`, `day`, `week`, `month`, `quarter`, `year`),
-- every job names its period in the task's zone (`2026-11`, `2026-W45`, `2026-11-04`, or
-- for `slot` the slot's local time and offset), and almanac.slots is the ledger of
-- periods: one row per (task, period), holding the one instant the period's jobs are
-- keyed under. Every path that creates jobs (the scheduler, a backfill, almanac.enqueue,
-- `almanac enqueue`) asks the ledger first, so (task, period, key) names one job: the
-- primary key (task, slot, key) is that identity because slot is a function of period.

-- The unit, as the task declares it (`period = ...` in almanac.toml) or its default from
-- the cron (host/src/calendar/period.rs: Period::default_for, mirrored here for the rows
-- that exist and for schedules inserted by hand; a unit test holds the two together).
-- `period_from`, `period_before`: once `almanac apply --period-from` changed the unit, the
-- first local day of the current unit and the unit of the instants before it.
ALTER TABLE almanac.schedules ADD COLUMN period text, ADD COLUMN period_from date, ADD COLUMN period_before text;

CREATE FUNCTION almanac.default_period(cron text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f text[];
    single text := '^[0-9A-Za-z]+$';
BEGIN
    IF cron IS NULL THEN
        RETURN 'slot';
    END IF;
    CASE lower(trim(cron))
        WHEN '@yearly', '@annually' THEN RETURN 'year';
        WHEN '@monthly' THEN RETURN 'month';
        WHEN '@weekly' THEN RETURN 'week';
        WHEN '@daily', '@midnight' THEN RETURN 'day';
        WHEN '@hourly' THEN RETURN 'slot';
        ELSE NULL;
    END CASE;
    f := regexp_split_to_array(trim(cron), '\s+');
    IF cardinality(f) = 6 THEN
        IF f[1] !~ '^[0-9]+$' THEN RETURN 'slot'; END IF;
        f := f[2:6];
    END IF;
    IF cardinality(f) <> 5 OR f[1] !~ '^[0-9]+$' OR f[2] !~ '^[0-9]+$' THEN
        RETURN 'slot';
    END IF;
    IF f[3] ~ single AND f[5] IN ('*', '?') THEN
        IF f[4] IN ('*', '?') THEN RETURN 'month'; END IF;
        IF f[4] ~ single THEN RETURN 'year'; END IF;
        IF f[4] IN ('*/3', '1-12/3', '1,4,7,10', '2,5,8,11', '3,6,9,12') THEN RETURN 'quarter'; END IF;
        RETURN 'day';
    END IF;
    IF f[3] IN ('*', '?') AND f[5] ~ single THEN
        RETURN 'week';
    END IF;
    RETURN 'day';
END $$;

UPDATE ONLY almanac.schedules SET period = almanac.default_period(cron);
ALTER TABLE almanac.schedules ALTER COLUMN period SET NOT NULL,
    ADD CONSTRAINT schedules_period_check CHECK (period IN ('slot', 'day', 'week', 'month', 'quarter', 'year')),
    ADD CONSTRAINT schedules_period_before_check CHECK (period_before IN ('slot', 'day', 'week', 'month', 'quarter', 'year'));

-- A schedule inserted without a period (by hand, by an older tool) gets its cron's default.
CREATE FUNCTION almanac.schedule_period() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.period := almanac.default_period(NEW.cron);
    RETURN NEW;
END $$;
CREATE TRIGGER schedules_period BEFORE INSERT ON almanac.schedules
    FOR EACH ROW WHEN (NEW.period IS NULL) EXECUTE FUNCTION almanac.schedule_period();

-- The period of instant `at` in `zone`: the same names host/src/calendar/period.rs gives
-- (for `slot`: local time to the minute, seconds when not zero, then milli- or
-- microseconds when not zero, and the UTC offset).
CREATE FUNCTION almanac.period_label(unit text, zone text, at timestamptz) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    wall timestamp := at AT TIME ZONE zone;
    off interval;
    us bigint;
BEGIN
    CASE unit
        WHEN 'day' THEN RETURN to_char(wall, 'YYYY-MM-DD');
        WHEN 'week' THEN RETURN to_char(wall, 'IYYY-"W"IW');
        WHEN 'month' THEN RETURN to_char(wall, 'YYYY-MM');
        WHEN 'quarter' THEN RETURN to_char(wall, 'YYYY-"Q"Q');
        WHEN 'year' THEN RETURN to_char(wall, 'YYYY');
        ELSE
            off := wall - (at AT TIME ZONE 'UTC');
            us := extract(microseconds FROM wall)::bigint % 1000000;
            RETURN to_char(wall, CASE WHEN us <> 0 AND us % 1000 = 0 THEN 'YYYY-MM-DD"T"HH24:MI:SS.MS'
                                      WHEN us <> 0 THEN 'YYYY-MM-DD"T"HH24:MI:SS.US'
                                      WHEN extract(microseconds FROM wall)::bigint <> 0 THEN 'YYYY-MM-DD"T"HH24:MI:SS'
                                      ELSE 'YYYY-MM-DD"T"HH24:MI' END)
                || CASE WHEN off < interval '0' THEN '-' || to_char(-off, 'HH24:MI') ELSE '+' || to_char(off, 'HH24:MI') END;
    END CASE;
END $$;

-- The ledger of periods. `slot`: the instant the period's jobs are keyed under (the first
-- slot it was generated or enqueued at; a later calendar's instant for the same period
-- maps onto it). `revision`: the schedule's revision it was generated under. Status
-- `enqueued`: jobs came only from almanac.enqueue, the period itself was not generated.
ALTER TABLE almanac.slots ADD COLUMN period text, ADD COLUMN revision bigint;
ALTER TABLE almanac.slots DROP CONSTRAINT slots_status_check;
ALTER TABLE almanac.slots ADD CONSTRAINT slots_status_check CHECK (status IN ('generated', 'skipped', 'enqueued'));

-- Each existing slot's period under the calendar it was generated by: the zone and the
-- revision of the newest change recorded before it was generated.
UPDATE almanac.slots s
SET period = almanac.period_label(sc.period,
                 coalesce((SELECT c.after->>'zone' FROM almanac.changes c
                           WHERE c.task = s.task AND c.at <= s.generated_at AND c.after ? 'zone'
                           ORDER BY c.id DESC LIMIT 1), sc.zone),
                 s.slot),
    revision = (SELECT c.revision FROM almanac.changes c
                WHERE c.task = s.task AND c.at <= s.generated_at AND c.revision > 0
                ORDER BY c.id DESC LIMIT 1)
FROM ONLY almanac.schedules sc
WHERE sc.task = s.task;
DELETE FROM almanac.slots WHERE period IS NULL; -- a forgotten task's rows

-- Every job's period: its slot's in the ledger, else (enqueued jobs) its instant's.
ALTER TABLE almanac.jobs ADD COLUMN period text;
UPDATE almanac.jobs j SET period = s.period FROM almanac.slots s WHERE s.task = j.task AND s.slot = j.slot;
UPDATE almanac.jobs j SET period = almanac.period_label(sc.period, sc.zone, j.slot)
FROM ONLY almanac.schedules sc WHERE j.period IS NULL AND sc.task = j.task;
UPDATE almanac.jobs SET period = almanac.period_label('slot', 'UTC', slot) WHERE period IS NULL;
ALTER TABLE almanac.jobs ALTER COLUMN period SET NOT NULL;

-- Periods whose jobs came only from enqueues get their ledger row (so a later generation
-- keys its jobs under the same instant); on-demand tasks have no calendar and no ledger.
INSERT INTO almanac.slots (task, slot, status, reason, jobs, period)
SELECT j.task, min(j.slot), 'enqueued', 'enqueue', count(*), j.period
FROM almanac.jobs j
JOIN ONLY almanac.schedules sc ON sc.task = j.task AND sc.cron IS NOT NULL
WHERE NOT EXISTS (SELECT 1 FROM almanac.slots s WHERE s.task = j.task AND s.period = j.period)
GROUP BY j.task, j.period
ON CONFLICT (task, slot) DO NOTHING;

-- A period already made under two instants (the defect this migration ends: a second
-- ledger row, or jobs enqueued at another instant). One instant is its own from now on:
-- a generated row's (the earliest), else the earliest. Pending jobs of such a period
-- whose key is done, or pending under an earlier instant, are discarded rather than run
-- a second time; the other jobs of the other instants move onto the kept one, so the
-- key stays guarded.
CREATE TEMP TABLE v11_twice ON COMMIT DROP AS
SELECT t.task, t.period,
       coalesce((SELECT s.slot FROM almanac.slots s WHERE s.task = t.task AND s.period = t.period
                 ORDER BY s.status = 'generated' DESC, s.slot LIMIT 1), min(t.slot)) AS slot,
       (SELECT coalesce(sum(s.jobs), 0) FROM almanac.slots s WHERE s.task = t.task AND s.period = t.period) AS jobs
FROM (SELECT task, period, slot FROM almanac.jobs GROUP BY task, period, slot
      UNION SELECT task, period, slot FROM almanac.slots) t
GROUP BY t.task, t.period
HAVING count(DISTINCT t.slot) > 1;
DELETE FROM almanac.slots s USING v11_twice t WHERE s.task = t.task AND s.period = t.period AND s.slot <> t.slot;
UPDATE almanac.slots s SET jobs = t.jobs FROM v11_twice t WHERE s.task = t.task AND s.slot = t.slot;

WITH keyed AS (
    SELECT j.task, j.slot, j.key, j.status,
           bool_or(j.status = 'done') OVER w AS done_once,
           min(j.slot) FILTER (WHERE j.status = 'pending') OVER w AS first_pending
    FROM almanac.jobs j
    JOIN v11_twice t ON t.task = j.task AND t.period = j.period
    WINDOW w AS (PARTITION BY j.task, j.period, j.key)
), duplicate AS (
    SELECT task, slot, key FROM keyed WHERE status = 'pending' AND (done_once OR slot > first_pending)
), discarded AS (
    UPDATE almanac.jobs j
    SET status = 'discarded', completed_at = now(),
        last_error = 'discarded by migration V11: its period ' || j.period || ' already has this key under another instant'
    FROM duplicate d WHERE (j.task, j.slot, j.key) = (d.task, d.slot, d.key)
    RETURNING j.task, j.slot
)
INSERT INTO almanac.job_counts (task, month, pending, discarded)
SELECT task, date_trunc('month', slot, 'UTC'), -count(*), count(*) FROM discarded GROUP BY 1, 2;

-- The remaining jobs at other instants whose key the kept instant lacks (one row per key:
-- the done one first) move there, with their attempt history. An UPDATE that moves a
-- row between month partitions fires no insert or delete counting: counted here.
CREATE TEMP TABLE v11_moved ON COMMIT DROP AS
SELECT DISTINCT ON (j.task, j.period, j.key) j.task, j.slot AS old_slot, t.slot AS new_slot, j.key, j.status
FROM almanac.jobs j
JOIN v11_twice t ON t.task = j.task AND t.period = j.period AND j.slot <> t.slot
WHERE NOT EXISTS (SELECT 1 FROM almanac.jobs k WHERE k.task = j.task AND k.slot = t.slot AND k.key = j.key)
ORDER BY j.task, j.period, j.key, j.status = 'done' DESC, j.slot;
UPDATE almanac.jobs j SET slot = m.new_slot FROM v11_moved m WHERE (j.task, j.slot, j.key) = (m.task, m.old_slot, m.key);
UPDATE almanac.attempts a SET slot = m.new_slot FROM v11_moved m WHERE (a.task, a.slot, a.key) = (m.task, m.old_slot, m.key);
INSERT INTO almanac.job_counts (task, month, pending, done, failed, discarded)
SELECT task, month, sum(sign * (status = 'pending')::int), sum(sign * (status = 'done')::int),
       sum(sign * (status = 'failed')::int), sum(sign * (status = 'discarded')::int)
FROM (SELECT task, date_trunc('month', old_slot, 'UTC') AS month, -1 AS sign, status FROM v11_moved
      UNION ALL
      SELECT task, date_trunc('month', new_slot, 'UTC'), 1, status FROM v11_moved) d
GROUP BY task, month;

ALTER TABLE almanac.slots DROP CONSTRAINT slots_pkey;
ALTER TABLE almanac.slots ALTER COLUMN period SET NOT NULL;
ALTER TABLE almanac.slots ADD PRIMARY KEY (task, period);
ALTER TABLE almanac.slots ADD CONSTRAINT slots_slot_key UNIQUE (task, slot);

-- The instant the period of `at` is keyed under for a scheduled task (recorded in the
-- ledger as `enqueued` when the period is new), and the period; for an on-demand task,
-- `at` itself (its periods are its instants). An instant the ledger already keys a
-- period under is that period, whatever label the current calendar would give it (a
-- zone changed since). Before `period_from`, the unit before the last change of unit.
CREATE FUNCTION almanac.period_slot(task text, at timestamptz, OUT slot timestamptz, OUT period text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    sc record;
    unit text;
    known record;
BEGIN
    SELECT s.cron, s.zone, s.period, s.period_from, s.period_before INTO sc
    FROM ONLY almanac.schedules s WHERE s.task = period_slot.task;
    unit := coalesce(sc.period, 'slot');
    IF sc.period_from IS NOT NULL AND isfinite(at) AND (at AT TIME ZONE sc.zone)::date < sc.period_from THEN
        unit := coalesce(sc.period_before, unit);
    END IF;
    period := coalesce(almanac.period_label(unit, coalesce(sc.zone, 'UTC'), at), at::text);
    -- An instant out of range ('-infinity', year 200000) has no period: the job's own
    -- check (instants_in_range) refuses it.
    IF sc.cron IS NULL OR NOT isfinite(at) OR at < '0001-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00' THEN
        slot := at;
        RETURN;
    END IF;
    SELECT l.slot, l.period INTO known FROM almanac.slots l WHERE l.task = period_slot.task AND l.slot = at;
    IF NOT FOUND THEN
        SELECT l.slot, l.period INTO known FROM almanac.slots l WHERE l.task = period_slot.task AND l.period = period;
    END IF;
    IF known.slot IS NOT NULL THEN
        slot := known.slot;
        period := known.period;
        RETURN;
    END IF;
    slot := at;
    INSERT INTO almanac.slots AS l (task, slot, status, reason, jobs, period)
    VALUES (task, slot, 'enqueued', 'enqueue', 0, period)
    ON CONFLICT ON CONSTRAINT slots_pkey DO NOTHING;
    IF NOT FOUND THEN
        -- A concurrent enqueue of the same period won the row: use its instant.
        SELECT l.slot INTO slot FROM almanac.slots l WHERE l.task = period_slot.task AND l.period = period;
    END IF;
END $$;
REVOKE ALL ON FUNCTION almanac.period_slot(text, timestamptz) FROM PUBLIC;

-- A job inserted without its period (by hand, or by an older tool): the period of its
-- instant, recorded in the ledger if new; refused if the ledger keys that period under
-- another instant, which would make a second identity for it. The host's own inserts
-- name the period, so the condition spares them the call.
CREATE FUNCTION almanac.job_period() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p record;
BEGIN
    p := almanac.period_slot(NEW.task, NEW.slot);
    IF p.slot <> NEW.slot THEN
        RAISE EXCEPTION 'almanac.jobs: period % of task "%" is keyed under %, not %', p.period, NEW.task, p.slot, NEW.slot
            USING ERRCODE = '23505', HINT = 'almanac.enqueue maps any instant of a period onto the period''s own';
    END IF;
    NEW.period := p.period;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_period BEFORE INSERT ON almanac.jobs
    FOR EACH ROW WHEN (NEW.period IS NULL) EXECUTE FUNCTION almanac.job_period();

-- The SQL enqueue API by period: a slot of a period that was generated (or enqueued)
-- under another instant maps onto that instant, so the same (task, period, key) is a
-- no-op whatever calendar the caller's instant came from. The calendar check accepts an
-- instant of the current calendar, or the instant the ledger keys a period under (one of
-- an older calendar); any other needs off_calendar.
CREATE OR REPLACE FUNCTION almanac.check_enqueue(task text, slot timestamptz, off_calendar boolean)
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
        RAISE EXCEPTION 'almanac.enqueue: slot must not be NULL (an instant of the business period the job belongs to)'
            USING ERRCODE = '22004';
    END IF;
    SELECT sc.cron, sc.zone, sc.calendar INTO s FROM ONLY almanac.schedules sc WHERE sc.task = check_enqueue.task;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'almanac.enqueue: no task "%": no host has registered it', task
            USING ERRCODE = '42704',
                  HINT = 'known tasks: ' || coalesce((SELECT string_agg(sc.task, ', ' ORDER BY sc.task) FROM ONLY almanac.schedules sc), 'none');
    END IF;
    IF s.cron IS NULL OR off_calendar OR EXISTS (
        SELECT 1 FROM almanac.slots sl WHERE sl.task = check_enqueue.task AND sl.slot = check_enqueue.slot) THEN
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

-- What the jobs table's constraints would refuse, refused first with the limit named
-- (an application got `new row for relation "jobs_default" violates check constraint
-- "instants_in_range"`): instants the host can read back, a payload of at most 1 MiB.
CREATE FUNCTION almanac.check_job(slot timestamptz, run_after timestamptz, payload jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bytes integer;
BEGIN
    IF NOT (slot >= '0001-01-01 00:00:00+00' AND slot < '10000-01-01 00:00:00+00') THEN
        RAISE EXCEPTION 'almanac.enqueue: slot % is outside years 1 to 9999, the instants Almanac reads back', slot USING ERRCODE = '22023';
    END IF;
    IF run_after IS NOT NULL AND NOT (run_after >= '0001-01-01 00:00:00+00' AND run_after < '10000-01-01 00:00:00+00') THEN
        RAISE EXCEPTION 'almanac.enqueue: run_after % is outside years 1 to 9999, the instants Almanac reads back', run_after USING ERRCODE = '22023';
    END IF;
    bytes := octet_length(payload::text);
    IF bytes > 1048576 THEN
        RAISE EXCEPTION 'almanac.enqueue: a payload of % bytes; the limit is 1048576 (1 MiB)', bytes USING ERRCODE = '22023';
    END IF;
END $$;
REVOKE ALL ON FUNCTION almanac.check_job(timestamptz, timestamptz, jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION almanac.enqueue(task text, slot timestamptz, key text, payload jsonb DEFAULT NULL,
                                           run_after timestamptz DEFAULT NULL, off_calendar boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p record;
    created boolean;
BEGIN
    PERFORM almanac.check_rights(enqueue.task);
    PERFORM almanac.check_enqueue(enqueue.task, enqueue.slot, coalesce(enqueue.off_calendar, false));
    PERFORM almanac.check_key(enqueue.key);
    PERFORM almanac.check_job(enqueue.slot, enqueue.run_after, enqueue.payload);
    p := almanac.period_slot(enqueue.task, enqueue.slot);
    INSERT INTO almanac.jobs (task, slot, key, payload, run_after, period)
    VALUES (enqueue.task, p.slot, enqueue.key, enqueue.payload, greatest(coalesce(enqueue.run_after, now()), enqueue.slot), p.period)
    ON CONFLICT (task, slot, key) DO NOTHING;
    created := FOUND;
    IF created THEN
        UPDATE almanac.slots l SET jobs = l.jobs + 1 WHERE l.task = enqueue.task AND l.period = p.period;
    END IF;
    RETURN created;
END $$;

CREATE OR REPLACE FUNCTION almanac.enqueue_many(task text, slot timestamptz, keys text[], payload jsonb DEFAULT NULL,
                                                off_calendar boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    bad text;
    created integer;
    p record;
BEGIN
    PERFORM almanac.check_rights(enqueue_many.task);
    PERFORM almanac.check_enqueue(enqueue_many.task, enqueue_many.slot, coalesce(enqueue_many.off_calendar, false));
    IF keys IS NULL THEN
        RAISE EXCEPTION 'almanac.enqueue_many: keys must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT k INTO bad FROM unnest(keys) k WHERE k IS NULL OR k = '' OR octet_length(k) > 1024 LIMIT 1;
    IF FOUND THEN
        PERFORM almanac.check_key(bad);
    END IF;
    PERFORM almanac.check_job(enqueue_many.slot, NULL, enqueue_many.payload);
    p := almanac.period_slot(enqueue_many.task, enqueue_many.slot);
    INSERT INTO almanac.jobs (task, slot, key, payload, run_after, period)
    SELECT enqueue_many.task, p.slot, k, enqueue_many.payload, greatest(now(), enqueue_many.slot), p.period
    FROM unnest(keys) k
    ON CONFLICT (task, slot, key) DO NOTHING;
    GET DIAGNOSTICS created = ROW_COUNT;
    IF created > 0 THEN
        UPDATE almanac.slots l SET jobs = l.jobs + created WHERE l.task = enqueue_many.task AND l.period = p.period;
    END IF;
    RETURN created;
END $$;

-- The claims return each job's period: the plugin sees it as its slot's label.
DROP FUNCTION almanac_job.claim(integer, timestamptz, text);
DROP FUNCTION almanac_job.claim_one(timestamptz, text, text);

CREATE FUNCTION almanac_job.claim(batch integer, floor timestamptz, digest text)
RETURNS TABLE (task text, slot timestamptz, key text, attempts integer, payload text, crashes integer,
               last_error text, plugin_digest text, run_after timestamptz, period text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan SET jit = off
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
SET enable_bitmapscan = off SET enable_sort = off
AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
BEGIN
    RETURN QUERY
    WITH due AS (
        SELECT j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.run_after
        FROM almanac.jobs j
        WHERE j.status = 'pending' AND j.run_after <= now() AND j.task = mine AND j.slot >= floor
        ORDER BY j.run_after, j.slot, j.task, j.key
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE almanac.jobs AS j
        SET status = 'done', attempts = due.attempts + 1, completed_at = now(), plugin_digest = digest, last_error = NULL
        FROM due
        WHERE j.task = due.task AND j.slot = due.slot AND j.key = due.key AND j.slot >= floor
        RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest,
                  due.run_after, j.period
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, pending, done)
        SELECT c.task, date_trunc('month', c.slot, 'UTC'), -count(*), count(*) FROM claimed c GROUP BY 1, 2
    )
    SELECT * FROM claimed;
END $$;

CREATE FUNCTION almanac_job.claim_one(at timestamptz, named text, digest text)
RETURNS TABLE (task text, slot timestamptz, key text, attempts integer, payload text, crashes integer,
               last_error text, plugin_digest text, run_after timestamptz, period text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    mine text := almanac.session_task();
BEGIN
    RETURN QUERY
    WITH due AS (
        SELECT j.task, j.slot, j.key, j.attempts, j.last_error, j.plugin_digest, j.run_after
        FROM almanac.jobs j
        WHERE j.task = mine AND j.slot = at AND j.key = named AND j.status = 'pending'
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE almanac.jobs AS j
        SET status = 'done', attempts = due.attempts + 1, completed_at = now(), plugin_digest = digest, last_error = NULL
        FROM due
        WHERE j.task = due.task AND j.slot = due.slot AND j.key = due.key
        RETURNING j.task, j.slot, j.key, due.attempts, j.payload::text AS payload, j.crashes, due.last_error, due.plugin_digest,
                  due.run_after, j.period
    ), counted AS (
        INSERT INTO almanac.job_counts (task, month, pending, done)
        SELECT c.task, date_trunc('month', c.slot, 'UTC'), -count(*), count(*) FROM claimed c GROUP BY 1, 2
    )
    SELECT * FROM claimed;
END $$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA almanac_job FROM PUBLIC;
-- The plugins' roles had EXECUTE on the two dropped functions; hosts grant it again at
-- start, and here for the roles that exist.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'almanac\_task\_%' LOOP
        EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA almanac_job TO %I', r.rolname);
    END LOOP;
END $$;
