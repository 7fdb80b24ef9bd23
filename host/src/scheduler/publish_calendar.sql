-- The calendar almanac.enqueue checks slots against, republished as its window ages
-- (or after an upgrade left it empty). Not a change of the schedule: no revision.
UPDATE ONLY almanac.schedules SET calendar = $2 WHERE task = $1
