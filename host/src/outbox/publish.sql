-- One outbox message, in the job's transaction. A second publish of the same
-- (topic, key) inserts nothing and reports 0 rows: the first payload stands.
INSERT INTO almanac.outbox (topic, key, payload, content_type, task)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (topic, key) DO NOTHING
