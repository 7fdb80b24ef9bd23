-- The cursor row, locked for this tick. SKIP LOCKED: if another scheduler holds it,
-- that one is generating and this one has nothing to do.
SELECT generated_through, paused, now()
FROM ONLY almanac.schedules
WHERE task = $1
FOR UPDATE SKIP LOCKED
