-- The done counts of the history as the claims would have kept them.
INSERT INTO almanac.done_counts (task, month, done)
SELECT task, date_trunc('month', slot, 'UTC'), count(*) FROM almanac.jobs WHERE status = 'done' GROUP BY 1, 2
