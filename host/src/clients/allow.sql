-- Role $1 may enqueue into task $2.
INSERT INTO almanac.enqueue_grants (grantee, task) VALUES ($1, $2) ON CONFLICT DO NOTHING
