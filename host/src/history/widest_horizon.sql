-- The task whose backfill horizon reaches back furthest, and how far (seconds): no prune
-- may cut inside it.
SELECT task, extract(epoch FROM horizon)::float8 FROM almanac.schedules ORDER BY horizon DESC, task LIMIT 1
