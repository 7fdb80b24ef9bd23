-- The ledger of periods: period $5 generated under revision $6, keyed under $2, with $4
-- jobs (add_jobs.sql adds those inserted after). A backfill of a period that was skipped
-- (or only enqueued into) turns it into generated.
INSERT INTO almanac.slots (task, slot, status, reason, jobs, period, revision)
VALUES ($1, $2, 'generated', $3, $4, $5, $6)
ON CONFLICT (task, period) DO UPDATE
SET status = 'generated', reason = EXCLUDED.reason, jobs = almanac.slots.jobs + EXCLUDED.jobs,
    revision = EXCLUDED.revision, generated_at = now()
