-- The order and its receipt job commit together, or neither does.
BEGIN;
WITH o AS (
    INSERT INTO orders (id, email) VALUES (42, 'ada@example.com') RETURNING id, email, placed_at
)
SELECT almanac.enqueue('send-receipt', o.placed_at, 'order-' || o.id,
                       jsonb_build_object('order', o.id, 'email', o.email))
FROM o;
COMMIT;
