-- daily-points' own statements, as the plugin sends them (plugins/daily-points).
INSERT INTO points_ledger (task, period, account_id, points, slot)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING
