-- A claimed job this host cannot run after all (its plugin went away between the claim
-- and the run): pending again, exactly as it was before claim.sql marked it.
-- The counts the claim moved are moved back.
WITH restored AS (
    UPDATE almanac.jobs
    SET status = 'pending', attempts = attempts - 1, completed_at = NULL,
        last_error = $4, plugin_digest = $5
    WHERE task = $1 AND slot = $2 AND key = $3 AND status = 'done'
    RETURNING task, slot
)
INSERT INTO almanac.job_counts (task, month, pending, done)
SELECT task, date_trunc('month', slot, 'UTC'), 1, -1 FROM restored
