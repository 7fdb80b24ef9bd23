-- Role $1 may no longer enqueue into task $2.
DELETE FROM almanac.enqueue_grants WHERE grantee = $1 AND task = $2
