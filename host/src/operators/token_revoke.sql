-- Revoke $1 and end its sessions; its row stays. Returns whether a live token was revoked.
WITH revoked AS (
    UPDATE almanac.console_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL RETURNING name
), ended AS (
    DELETE FROM almanac.console_sessions WHERE token IN (SELECT name FROM revoked)
)
SELECT count(*) FROM revoked
