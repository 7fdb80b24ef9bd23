-- A refused deploy, visible to every operator (issue 30): a plugin file a host would not
-- load (it does not compile, disagrees with the stored schedule, or its setup failed),
-- while the version before it, if any, keeps serving. Each serving host replaces its own
-- rows (host name and plugins folder) after every read of its folder, so a file that
-- loads, or is removed, is gone from here; a host that stops clears its rows. While a
-- host has refusals it touches `seen_at` every minute: a row nobody touched for longer
-- belongs to a host that was killed or retired, and is shown as stale, not as current.
CREATE TABLE almanac.refused_deploys (
    host       text        NOT NULL,
    dir        text        NOT NULL,
    file       text        NOT NULL,
    digest     text        NOT NULL,
    -- The task the file provides, when it loaded far enough to say.
    task       text,
    -- The version that keeps serving instead ("0.1.0 (1a2b3c4d5e6f)"), if any.
    serving    text,
    reason     text        NOT NULL,
    refused_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, dir, file)
);
