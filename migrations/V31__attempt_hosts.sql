-- Which host made each attempt, for the job's page and `almanac jobs --attempts`. An
-- attempt that fails or is interrupted is recorded inside the job's own transaction
-- (almanac_job.fail, almanac_job.interrupted), on the backend whose claim holds the job
-- (host/src/executor/claims.rs reads the backend inside that transaction, a pooler's
-- included): so the column's default names that claim's host, and neither function nor
-- the hosts calling them change. The sweep records crashes from another backend and
-- names the claim's host itself. Attempts recorded before this migration have none.
CREATE FUNCTION almanac.claiming_host() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.host FROM almanac.claims c
    WHERE c.pid = pg_backend_pid()
      AND c.backend_start = (SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a)
$$;

-- Added, then defaulted: a volatile default on ADD COLUMN would rewrite the table.
ALTER TABLE almanac.attempts ADD COLUMN host text;
ALTER TABLE almanac.attempts ALTER COLUMN host SET DEFAULT almanac.claiming_host();
