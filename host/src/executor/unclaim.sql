-- A claimed job ($1 slot, $2 key of the session's task) this host does not run after
-- all: pending again, exactly as it was before claim.sql marked it ($3 its last error,
-- $4 its digest then).
SELECT almanac_job.unclaim($1, $2, $3, $4)
