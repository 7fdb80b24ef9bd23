-- May the claimed suspect ($1 slot, $2 key of the session's task) run now, alone across
-- all hosts? If not, its claim is undone ($3 its last error, $4 its digest then) and it
-- waits a second (migrations/V14__server_crashes.sql).
SELECT almanac_job.alone($1, $2, $3, $4)
