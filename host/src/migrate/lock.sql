-- Quiet: "already exists, skipping" on every start is noise.
SET client_min_messages = warning;
-- The lock `almanac migrate` holds while it migrates, made before the first migration
-- (which it must cover). A row of a host table rather than an advisory key: any session
-- of the database can take an advisory key, and a plugin that reached
-- pg_advisory_lock once held this one and hung every host's start.
CREATE SCHEMA IF NOT EXISTS almanac;
CREATE TABLE IF NOT EXISTS almanac.migration_lock (
    one boolean PRIMARY KEY DEFAULT true CHECK (one)
);
INSERT INTO almanac.migration_lock DEFAULT VALUES ON CONFLICT DO NOTHING;
