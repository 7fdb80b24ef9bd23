-- Whether TASK ($1) has a schedule row (one the tick found locked), without waiting for it.
SELECT 1 FROM ONLY almanac.schedules WHERE task = $1
