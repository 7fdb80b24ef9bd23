//! LISTEN/NOTIFY wake-ups: a dedicated connection listens (the jobs, schedules and
//! outbox triggers notify) and bumps a counter per channel that idle workers wait on.
//! Polling stays the fallback, so a lost notification only costs latency.
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

/// The channel the jobs insert trigger notifies (migrations/V1__core.sql).
pub const JOBS: &str = "almanac_jobs";
/// The channel the outbox insert trigger notifies (migrations/V3__outbox.sql).
pub const OUTBOX: &str = "almanac_outbox";
/// The channel a change to a schedule notifies (migrations/V28__schedules_notify.sql).
pub const SCHEDULES: &str = "almanac_schedules";

/// Listen on each channel named in `routes`, bumping every counter routed from it; all
/// of them once more whenever the listening (re)starts, for what arrived unheard.
pub async fn listen(target: crate::db::Target, routes: Vec<(&'static str, watch::Sender<u64>)>, shutdown: CancellationToken) {
    let mut channels: Vec<&str> = routes.iter().map(|(c, _)| *c).collect();
    channels.sort_unstable();
    channels.dedup();
    let channel = channels.join(",");
    let bump = |from: Option<&str>| {
        for (c, wake) in &routes {
            if from.is_none_or(|from| from == *c) {
                wake.send_modify(|n| *n += 1);
            }
        }
    };
    let mut delay = Duration::from_millis(200);
    while !shutdown.is_cancelled() {
        match target.connect().await {
            Ok((client, mut connection)) => {
                let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                let listen: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
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
                    // Rows may have arrived while nobody listened.
                    bump(None);
                    loop {
                        tokio::select! {
                            m = messages.next() => match m {
                                Some(Ok(AsyncMessage::Notification(n))) => bump(Some(n.channel())),
                                Some(Ok(_)) => {}
                                Some(Err(e)) => { tracing::debug!(%channel, "listener connection lost: {e}"); break; }
                                None => break,
                            },
                            _ = shutdown.cancelled() => return,
                        }
                    }
                }
            }
            Err(e) => tracing::debug!(%channel, "listener cannot connect: {}", crate::db::error_chain(&e)),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return,
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Wait while there is nothing to do: until a notification, the idle delay, or shutdown.
/// The delay doubles (up to `max`) each time a worker finds nothing, so an idle host
/// polls rarely while a notification still wakes it at once. Returns whether a
/// notification (not the delay) woke it.
///
/// The caller marks the notifications seen (`wake.borrow_and_update()`) *before* the look
/// that found nothing: one that arrived during that look then ends this wait at once
/// (marking them seen here lost it, and its job waited for the next poll).
pub async fn idle(wake: &mut watch::Receiver<u64>, delay: &mut Duration, max: Duration, shutdown: &CancellationToken) -> bool {
    let notified = tokio::select! {
        _ = wake.changed() => true,
        _ = tokio::time::sleep(*delay) => false,
        _ = shutdown.cancelled() => false,
    };
    *delay = (*delay * 2).min(max);
    notified
}

/// How an [`until`] wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// A notification (one that came before the wait began counts).
    Notified,
    /// The listener is gone: nothing will be announced again.
    Closed,
    /// The deadline passed.
    Time,
    /// What the caller watches on this host alone changed.
    Changed,
    Shutdown,
}

/// Until a notification on `wake`, `deadline`, or shutdown; and until `changed()` says
/// something only this host knows of (a reload announces nothing to the database)
/// changed, asked first and then every `step`. The notification is marked seen.
pub async fn until(
    wake: &mut watch::Receiver<u64>,
    deadline: Instant,
    step: Duration,
    mut changed: impl FnMut() -> bool,
    shutdown: &CancellationToken,
) -> Woken {
    loop {
        // A notification already here counts even when the deadline has passed: the
        // scheduler's often has (a task backing off rests until "now").
        match wake.has_changed() {
            Ok(true) => {
                wake.borrow_and_update();
                return Woken::Notified;
            }
            Ok(false) => {}
            Err(_) => return Woken::Closed,
        }
        if changed() {
            return Woken::Changed;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Woken::Time;
        }
        tokio::select! {
            seen = wake.changed() => return if seen.is_ok() { Woken::Notified } else { Woken::Closed },
            _ = tokio::time::sleep(left.min(step)) => {}
            _ = shutdown.cancelled() => return Woken::Shutdown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{until, Woken};
    use std::time::{Duration, Instant};
    use tokio::sync::watch;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn a_wait_ends_on_what_came_first_and_a_notification_already_here_beats_a_past_deadline() {
        let shutdown = CancellationToken::new();
        let (tx, mut rx) = watch::channel(0u64);
        let past = Instant::now();
        let step = Duration::from_millis(10);
        assert_eq!(until(&mut rx, past, step, || false, &shutdown).await, Woken::Time);
        tx.send_modify(|n| *n += 1);
        assert_eq!(until(&mut rx, past, step, || false, &shutdown).await, Woken::Notified);
        assert_eq!(until(&mut rx, past, step, || false, &shutdown).await, Woken::Time, "seen once");
        let later = Instant::now() + Duration::from_secs(60);
        let mut looks = 0;
        assert_eq!(
            until(
                &mut rx,
                later,
                step,
                || {
                    looks += 1;
                    looks == 3
                },
                &shutdown
            )
            .await,
            Woken::Changed
        );
        let notify = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.send_modify(|n| *n += 1);
            tx
        });
        assert_eq!(until(&mut rx, later, Duration::from_secs(60), || false, &shutdown).await, Woken::Notified);
        drop(notify.await.unwrap());
        assert_eq!(until(&mut rx, later, step, || false, &shutdown).await, Woken::Closed);
        let (_tx, mut rx) = watch::channel(0u64);
        shutdown.cancel();
        assert_eq!(until(&mut rx, later, Duration::from_secs(60), || false, &shutdown).await, Woken::Shutdown);
    }
}
