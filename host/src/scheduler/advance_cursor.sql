-- In the same transaction as the jobs of every slot up to $2.
UPDATE ONLY almanac.schedules
SET generated_through = $2, updated_at = now()
WHERE task = $1 AND generated_through < $2
