-- Claim one named job ($1 slot, $2 key) of the session's task, if it is still pending
-- and no one holds it, marked done as claim.sql marks them (its plugin's digest $3): a
-- job marked by a crash runs in a transaction of its own.
SELECT * FROM almanac_job.claim_one($1, $2, $3)
