// Place an order and enqueue its receipt in one transaction (node-postgres).
import pg from "pg";

export async function placeOrder(client, id, email) {
  await client.query("BEGIN");
  try {
    await client.query(
      `WITH o AS (INSERT INTO orders (id, email) VALUES ($1, $2) RETURNING id, email, placed_at)
       SELECT almanac.enqueue('send-receipt', o.placed_at, 'order-' || o.id,
                              jsonb_build_object('order', o.id, 'email', o.email))
       FROM o`,
      [id, email],
    );
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK");
    throw e;
  }
}

const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
await client.connect();
await placeOrder(client, Number(process.argv[2]), process.argv[3]);
await client.end();
