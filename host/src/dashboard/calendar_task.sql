-- Task $1's schedule as the calendar grid reads it: its zone, cursor, whether it is held
-- or paused, and the first period its scheduler handled (generated, empty or skipped;
-- an enqueue may name any period, before the task was ever scheduled): a period the
-- calendar has between it and the cursor, and the ledger lacks, is missing.
SELECT s.zone, s.generated_through, s.held, s.paused,
       (SELECT min(l.slot) FROM almanac.slots l WHERE l.task = s.task AND l.status <> 'enqueued')
FROM almanac.schedules s
WHERE s.task = $1
