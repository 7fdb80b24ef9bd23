-- One bounded batch of old done (or discarded) jobs, so a large prune never holds long locks.
DELETE FROM ONLY almanac.jobs
WHERE ctid IN (
    SELECT ctid FROM ONLY almanac.jobs
    WHERE status IN ('done', 'discarded') AND slot < now() - make_interval(secs => $1) AND completed_at < now() - make_interval(secs => $1)
    LIMIT 10000
)
