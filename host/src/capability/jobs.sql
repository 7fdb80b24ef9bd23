-- `jobs.enqueue`: one job of another task by identity, in the job's transaction, through
-- the host's function for plugin sessions (migration V26), which checks the session's
-- task may enqueue into $1 and then calls almanac.enqueue. $4 JSON text, $5 run-after.
SELECT almanac_job.enqueue($1, $2, $3, $4::jsonb, $5)
