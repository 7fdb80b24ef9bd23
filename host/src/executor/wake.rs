//! LISTEN/NOTIFY wake-up: one dedicated connection per process listens on
//! `almanac_jobs` (sent by the jobs insert trigger) and bumps a counter idle workers
//! wait on. Polling stays as the fallback, so a lost notification only costs latency.
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

pub async fn listen(config: tokio_postgres::Config, wake: watch::Sender<u64>, shutdown: CancellationToken) {
    let mut delay = Duration::from_millis(200);
    while !shutdown.is_cancelled() {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                let listening = async {
                    client.batch_execute("LISTEN almanac_jobs").await?;
                    Ok::<_, tokio_postgres::Error>(())
                };
                // The connection must be polled for LISTEN itself to complete.
                let mut listening = std::pin::pin!(listening);
                let subscribed = loop {
                    tokio::select! {
                        r = &mut listening => break r,
                        m = messages.next() => if m.is_none() { break Ok(()) },
                    }
                };
                if let Err(e) = subscribed {
                    tracing::debug!("LISTEN failed: {e}");
                } else {
                    delay = Duration::from_millis(200);
                    wake.send_modify(|n| *n += 1);
                    loop {
                        tokio::select! {
                            m = messages.next() => match m {
                                Some(Ok(AsyncMessage::Notification(_))) => wake.send_modify(|n| *n += 1),
                                Some(Ok(_)) => {}
                                Some(Err(e)) => { tracing::debug!("listener connection lost: {e}"); break; }
                                None => break,
                            },
                            _ = shutdown.cancelled() => return,
                        }
                    }
                }
            }
            Err(e) => tracing::debug!("listener cannot connect: {e}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return,
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}
