-- Business calendars (host/src/calendar/source.rs): what a schedule's holiday calendars
-- and business-day rule are made from — the calendars' iCalendar text, listed dates and
-- weekends, and the rule — stored beside the cron so that every host builds the same
-- calendar, whatever its own files say. NULL: cron and zone alone. Changed, like the
-- cron, only by `almanac apply` (recorded in almanac.changes with the calendars'
-- versions).
ALTER TABLE almanac.schedules ADD COLUMN business jsonb;

-- A scheduled period whose plan returned no keys is `empty` in the ledger, not
-- `generated`: a billing task whose plan found nothing to bill for a month is news, not
-- a success (almanac status reports it, and exits 1 for a task that expects jobs; the
-- gauge almanac_task_empty_periods counts them). The scheduler passes over an empty
-- period like a generated one; a backfill plans it again.
ALTER TABLE almanac.slots DROP CONSTRAINT slots_status_check;
ALTER TABLE almanac.slots ADD CONSTRAINT slots_status_check CHECK (status IN ('generated', 'skipped', 'enqueued', 'empty'));

-- `expect_jobs` (almanac.toml; by default true for a business-day rule): every period
-- of the task should have work, and an empty one makes `almanac status` exit 1.
ALTER TABLE almanac.schedules ADD COLUMN expect_jobs boolean NOT NULL DEFAULT false;
