-- The demo's business table, from scratch.
DROP TABLE IF EXISTS accounts;
CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0);
