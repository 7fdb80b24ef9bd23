-- Wake the hosts when a schedule changes (applied, paused or resumed, its cursor moved,
-- held or released): an idle scheduler sleeps until its next slot and an idle executor
-- until its next job comes due (host/src/wake.rs), so a change made meanwhile must say
-- so. Once per statement that changed a row: a statement-level trigger fires for a
-- statement that changed none too (the claims sweep's hold, nearly always), and that
-- woke every idle host each time.
CREATE FUNCTION almanac.notify_schedules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        PERFORM pg_notify('almanac_schedules', '');
    END IF;
    RETURN NULL;
END $$;

-- Two triggers: a transition table serves one event only.
CREATE TRIGGER schedules_notify_insert AFTER INSERT ON almanac.schedules
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION almanac.notify_schedules();
CREATE TRIGGER schedules_notify_update AFTER UPDATE ON almanac.schedules
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION almanac.notify_schedules();
