-- Accounts whose points are not $1, and the ledger's rows.
SELECT (SELECT count(*) FROM accounts WHERE points <> $1), (SELECT count(*) FROM points_ledger)
