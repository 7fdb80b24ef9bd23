-- The breaker rows of the topics a round delivered to, locked in one order so two rounds
-- never wait on each other in a circle. (A topic gets its row from its first publish, or
-- from `publishers` in almanac.toml.)
SELECT topic FROM almanac.outbox_topics WHERE topic = ANY($1::text[]) ORDER BY topic FOR UPDATE
