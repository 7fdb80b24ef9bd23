-- The seed's queue for the pgbench floor: one row per job, a partial index of the pending
-- ones in claim order, as the seed's article lays it out. Made anew for each run.
DROP TABLE IF EXISTS bench_floor_jobs;
CREATE TABLE bench_floor_jobs (
    id         bigserial PRIMARY KEY,
    account_id bigint NOT NULL,
    status     text   NOT NULL DEFAULT 'pending'
);
CREATE INDEX bench_floor_pending ON bench_floor_jobs (id) WHERE status = 'pending';
TRUNCATE points_ledger;
UPDATE accounts SET points = 0;
