//! LISTEN on `almanac_outbox` (sent by the outbox insert trigger when the publishing
//! job commits, and by `almanac outbox retry`) and bump a counter the idle dispatcher
//! waits on. Polling stays as the fallback, so a lost notification only costs latency.
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

pub const CHANNEL: &str = "almanac_outbox";

pub async fn listen(config: tokio_postgres::Config, wake: watch::Sender<u64>, shutdown: CancellationToken) {
    let mut delay = Duration::from_millis(200);
    while !shutdown.is_cancelled() {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                let listen = format!("LISTEN {CHANNEL}");
                let mut subscribing = std::pin::pin!(client.batch_execute(&listen));
                // The connection must be polled for LISTEN itself to complete.
                let subscribed = loop {
                    tokio::select! {
                        r = &mut subscribing => break r.is_ok(),
                        m = messages.next() => if m.is_none() { break false },
                        _ = shutdown.cancelled() => return,
                    }
                };
                if subscribed {
                    delay = Duration::from_millis(200);
                    // Messages may have arrived while nobody listened.
                    wake.send_modify(|n| *n += 1);
                    loop {
                        tokio::select! {
                            m = messages.next() => match m {
                                Some(Ok(AsyncMessage::Notification(_))) => wake.send_modify(|n| *n += 1),
                                Some(Ok(_)) => {}
                                Some(Err(e)) => { tracing::debug!("outbox listener connection lost: {e}"); break; }
                                None => break,
                            },
                            _ = shutdown.cancelled() => return,
                        }
                    }
                }
            }
            Err(e) => tracing::debug!("outbox listener cannot connect: {e}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return,
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}
