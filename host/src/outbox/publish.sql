-- One outbox message, in the job's transaction, sent in the plugin's own session: the
-- function records the session's task as the publisher. A second publish of the same
-- (topic, key) inserts nothing and returns 0: the first payload stands.
SELECT almanac_job.publish($1, $2, $3, $4)::bigint AS inserted
