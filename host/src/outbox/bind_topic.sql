-- A topic almanac.toml names ($1) without publishers: configured, its publishers (the first
-- task to publish, once one has) kept.
INSERT INTO almanac.outbox_topics (topic, publishers, configured) VALUES ($1, '{}', true)
ON CONFLICT (topic) DO UPDATE SET configured = true
RETURNING cardinality(publishers) = 0
