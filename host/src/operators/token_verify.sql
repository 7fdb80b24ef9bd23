-- The live token whose SHA-256 is $1, marked used (at most once a minute: a Bearer
-- client polling /metrics writes no row per scrape).
WITH found AS (
    SELECT name, role, grants, last_used_at FROM almanac.console_tokens WHERE hash = $1 AND revoked_at IS NULL
), used AS (
    UPDATE almanac.console_tokens t SET last_used_at = now()
    FROM found f WHERE t.name = f.name AND (f.last_used_at IS NULL OR f.last_used_at < now() - interval '1 minute')
)
SELECT name, role, grants FROM found
