-- $1 accounts at 0 points.
INSERT INTO accounts (id, points) SELECT g, 0 FROM generate_series(1, $1::bigint) g
