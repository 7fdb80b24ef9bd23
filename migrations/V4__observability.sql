-- Indexes for what operators look at often (metrics scrapes, the dashboard), on rows
-- that are few and never on the executor's hot path: failed jobs and dead outbox
-- messages. A job enters `failed` or a message `dead` once; done and delivered rows,
-- the bulk of both tables, are not in these indexes.
CREATE INDEX jobs_failed ON almanac.jobs (task, completed_at DESC)
    WHERE status = 'failed';

CREATE INDEX outbox_dead ON almanac.outbox (topic, id DESC)
    WHERE status = 'dead';
