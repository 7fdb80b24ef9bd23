-- The demo's business table, from scratch, and no ledger of an earlier run (daily-points'
-- setup makes it again when the host loads the plugin).
DROP TABLE IF EXISTS accounts;
DROP TABLE IF EXISTS points_ledger;
CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0);
