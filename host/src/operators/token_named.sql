-- The live token named $1: who an authenticating proxy's header names.
SELECT name, role, grants FROM almanac.console_tokens WHERE name = $1 AND revoked_at IS NULL
