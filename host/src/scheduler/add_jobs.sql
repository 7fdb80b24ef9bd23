-- The jobs a generated period got, added once they are in (its row went in first, so an
-- enqueue into the same period waits for this transaction instead of deadlocking on it).
UPDATE almanac.slots SET jobs = jobs + $3 WHERE task = $1 AND period = $2
