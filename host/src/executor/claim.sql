-- Claim up to $1 due jobs of the session's task from floor $2 (NULL: no floor) and mark
-- them done, for the plugin with digest $3: almanac_job.claim (migration V10) in the
-- session of the task's own login. The mark commits only with the jobs' work, as one
-- transaction; a job that fails rolls back to its savepoint and records its attempt over
-- the mark (mark_failed.sql). Returns each job as it was (attempts before this one, the
-- last error).
SELECT * FROM almanac_job.claim($1, coalesce($2, '-infinity'::timestamptz), $3)
