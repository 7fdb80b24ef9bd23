-- A topic's circuit closed: its pending messages waited out the outage, not their own
-- backoff, so they are due now. Messages another round holds are being delivered: they
-- are skipped, not waited for (that round may be waiting for this one's topic rows).
UPDATE almanac.outbox SET next_attempt_at = now()
WHERE id IN (SELECT id FROM almanac.outbox
             WHERE status = 'pending' AND topic = ANY($1::text[]) AND next_attempt_at > now()
             FOR UPDATE SKIP LOCKED)
