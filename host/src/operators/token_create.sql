-- A new token ($1 name, $2 role, $3 grants, $4 its SHA-256, $5 who made it); nothing if
-- the name is taken (revoked names included: they stay as evidence).
INSERT INTO almanac.console_tokens (name, role, grants, hash, created_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO NOTHING
RETURNING created_at
