-- The tasks almanac.toml lets publish on topic $1 ($2), as every host reads them at start:
-- they replace whoever had claimed the topic by publishing first.
INSERT INTO almanac.outbox_topics (topic, publishers, configured) VALUES ($1, $2, true)
ON CONFLICT (topic) DO UPDATE SET publishers = EXCLUDED.publishers, configured = true
