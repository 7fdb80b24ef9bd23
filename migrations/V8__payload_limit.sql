-- A job's payload is handed to its plugin on every attempt, and one claim reads a batch of
-- jobs into the host: it is bounded, whoever inserts the job (almanac.enqueue and
-- enqueue_many, `almanac enqueue`, a direct INSERT). 1 MiB of JSON text is far beyond a
-- job's parameters; bulk data belongs in the application's tables, named by the key.
-- NOT VALID: rows already there were accepted and are not re-read.
ALTER TABLE almanac.jobs ADD CONSTRAINT payload_at_most_1mib
    CHECK (payload IS NULL OR octet_length(payload::text) <= 1048576) NOT VALID;
