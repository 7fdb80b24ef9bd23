# Place an order and enqueue its receipt in one transaction (psycopg 3).
import os
import sys

import psycopg


def place_order(conn, order_id, email):
    with conn.transaction():
        conn.execute(
            """WITH o AS (INSERT INTO orders (id, email) VALUES (%s, %s) RETURNING id, email, placed_at)
               SELECT almanac.enqueue('send-receipt', o.placed_at, 'order-' || o.id,
                                      jsonb_build_object('order', o.id, 'email', o.email))
               FROM o""",
            (order_id, email),
        )


if __name__ == "__main__":
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        place_order(conn, int(sys.argv[1]), sys.argv[2])
