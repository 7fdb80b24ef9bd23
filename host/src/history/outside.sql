-- Jobs in the default partition (slots outside every month partition), counted up to a
-- bound: it is small by design, and `status` reports it when it is not empty.
SELECT count(*) FROM (SELECT 1 FROM almanac.jobs_default LIMIT 1000001) AS d
