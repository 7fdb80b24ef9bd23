-- A browser session for token $1 ($2 the cookie's SHA-256, $3 its CSRF token, $4 where
-- from, $5 seconds it lasts); expired sessions go as new ones come.
WITH gone AS (
    DELETE FROM almanac.console_sessions WHERE expires_at < now()
)
INSERT INTO almanac.console_sessions (hash, token, csrf, address, expires_at)
VALUES ($2, $1, $3, $4, now() + $5 * interval '1 second')
