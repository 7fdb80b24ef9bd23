/// Place an order and enqueue its receipt in one transaction (tokio-postgres).
pub async fn place_order(client: &mut tokio_postgres::Client, id: i64, email: &str) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute(
        "WITH o AS (INSERT INTO orders (id, email) VALUES ($1, $2) RETURNING id, email, placed_at)
         SELECT almanac.enqueue('send-receipt', o.placed_at, 'order-' || o.id,
                                jsonb_build_object('order', o.id, 'email', o.email))
         FROM o",
        &[&id, &email],
    )
    .await?;
    tx.commit().await
}
