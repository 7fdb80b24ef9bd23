-- Business calendars (host/src/calendar/source.rs): what a schedule's holiday calendars
-- and business-day rule are made from — the calendars' iCalendar text, listed dates and
-- weekends, and the rule — stored beside the cron so that every host builds the same
-- calendar, whatever its own files say. NULL: cron and zone alone. Changed, like the
-- cron, only by `almanac apply` (recorded in almanac.changes with the calendars'
-- versions).
ALTER TABLE almanac.schedules ADD COLUMN business jsonb;
