-- The live session whose cookie hashes to $1, its token live too.
SELECT t.name, t.role, t.grants, s.csrf
FROM almanac.console_sessions s JOIN almanac.console_tokens t ON t.name = s.token
WHERE s.hash = $1 AND s.expires_at > now() AND t.revoked_at IS NULL
