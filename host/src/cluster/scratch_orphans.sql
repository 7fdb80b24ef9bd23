-- Scratch databases (they carry the mark $1) the test harnesses made, named for the test
-- and the process running it (`almanac_test_3_12345`): name and process id, for the ones
-- whose process is gone to be dropped. A database named otherwise is never listed.
SELECT datname, substring(datname FROM '_([0-9]+)$')::int AS pid
FROM pg_database
WHERE shobj_description(oid, 'pg_database') = $1 AND datname ~ '^almanac_test_[0-9]+_[0-9]{1,9}$'
