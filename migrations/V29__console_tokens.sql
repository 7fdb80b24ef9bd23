-- Who may use the console and the JSON API of `almanac run --listen` (host/src/operators):
-- tokens made by `almanac token create`, each with a role and optional extra actions.
-- Only a token's SHA-256 is stored, the token itself is printed once; tokens are 256
-- random bits, so a fast hash is enough (no password to stretch). A revoked token stays
-- as evidence of who could act when; its name is not given again.
CREATE TABLE almanac.console_tokens (
    name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9._@-]{1,64}$'),
    role text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    grants text[] NOT NULL DEFAULT '{}',
    hash text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL,
    revoked_at timestamptz,
    last_used_at timestamptz
);

-- A browser's session after it signed in with a token: the cookie's SHA-256, and the
-- CSRF token the page sends with every action. Revoking the token ends them.
CREATE TABLE almanac.console_sessions (
    hash text PRIMARY KEY,
    token text NOT NULL REFERENCES almanac.console_tokens (name),
    csrf text NOT NULL,
    address text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX ON almanac.console_sessions (token);
