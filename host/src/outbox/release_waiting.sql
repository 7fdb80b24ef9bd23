-- A topic's circuit closed: its pending messages waited out the outage, not their own
-- backoff, so they are due now.
UPDATE almanac.outbox SET next_attempt_at = now()
WHERE status = 'pending' AND topic = ANY($1::text[]) AND next_attempt_at > now()
