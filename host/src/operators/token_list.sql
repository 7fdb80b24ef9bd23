-- Every token, live ones first, with its open sessions.
SELECT t.name, t.role, t.grants, t.created_at, t.created_by, t.revoked_at, t.last_used_at,
       (SELECT count(*) FROM almanac.console_sessions s WHERE s.token = t.name AND s.expires_at > now())
FROM almanac.console_tokens t
ORDER BY t.revoked_at IS NOT NULL, t.name
