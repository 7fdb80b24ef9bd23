-- The tasks given to roles one by one.
SELECT grantee, task FROM almanac.enqueue_grants ORDER BY grantee, task
