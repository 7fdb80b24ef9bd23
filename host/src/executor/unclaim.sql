-- A claimed job this host cannot run after all (its plugin went away between the claim
-- and the run): pending again, exactly as it was before claim.sql marked it.
UPDATE ONLY almanac.jobs
SET status = 'pending', attempts = attempts - 1, completed_at = NULL,
    last_error = $4, plugin_digest = $5
WHERE task = $1 AND slot = $2 AND key = $3
