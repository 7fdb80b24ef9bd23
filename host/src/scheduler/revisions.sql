-- These tasks' stored schedules' revisions (every change bumps one): what a host that
-- refused a task because its file disagreed waits on.
SELECT task, revision FROM ONLY almanac.schedules WHERE task = ANY($1::text[])
