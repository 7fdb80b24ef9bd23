-- The slot ledger: a generated slot and the jobs it got. A backfill of a slot that was
-- skipped (or generated before) turns it into generated and adds the new jobs.
INSERT INTO almanac.slots (task, slot, status, reason, jobs)
VALUES ($1, $2, 'generated', $3, $4)
ON CONFLICT (task, slot) DO UPDATE
SET status = 'generated', reason = EXCLUDED.reason, jobs = almanac.slots.jobs + EXCLUDED.jobs,
    generated_at = now()
