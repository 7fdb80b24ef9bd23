-- daily-points' own statements, as the plugin sends them (plugins/daily-points).
INSERT INTO points_ledger (task, slot, account_id, points)
VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
