-- At the start of a dispatch round: the state of each routed topic ($1) that has one.
-- `cooled`: no probe within the cooldown, so if its circuit is open one message may
-- test the receiver (whoever takes the lease in probe.sql sends it).
SELECT topic, paused, failures, open_until IS NULL OR open_until <= now() AS cooled
FROM almanac.outbox_topics
WHERE topic = ANY($1::text[])
