-- Who owns database $1, if it exists.
SELECT datdba::regrole::text FROM pg_database WHERE datname = $1
