-- One daily-points job per transaction, the seed's SQL, as pgbench runs it (-M prepared):
-- claim one pending job, the ledger row, the points, the done mark.
BEGIN;
SELECT id AS job, account_id AS account FROM bench_floor_jobs WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED \gset
INSERT INTO points_ledger (task, period, account_id, points, slot) VALUES ('daily-points', '2026-03-08', :account, 10, '2026-03-07T16:00:00Z') ON CONFLICT DO NOTHING;
UPDATE accounts SET points = points + 10 WHERE id = :account;
UPDATE bench_floor_jobs SET status = 'done' WHERE id = :job;
COMMIT;
