-- In the job's own transaction, after rolling back to its savepoint: the attempt (its
-- count was raised by the claim) is recorded on the job ($1 slot, $2 key of the session's
-- task), over the claim's done mark, and in the attempt history, even though the
-- plugin's writes are gone; the counts move with it. $3 the error, $4 give up now,
-- $5 backoff in seconds, $6 the plugin's digest, $7 this host (migration V31).
SELECT almanac_job.fail($1, $2, $3, $4, $5, $6, $7)
