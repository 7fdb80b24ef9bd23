-- `almanac outbox discard TOPIC [--key KEY] --reason WHY`: recall messages not yet
-- delivered (pending or dead). They stay, `discarded`, with the reason and the role that
-- said so; no host delivers them. A message being delivered right now is waited for:
-- once delivered it is not discarded.
UPDATE almanac.outbox
SET status = 'discarded', discarded_reason = $3, discarded_by = session_user, dispatched_at = now()
WHERE status IN ('pending', 'dead') AND topic = $1 AND ($2::text IS NULL OR key = $2)
