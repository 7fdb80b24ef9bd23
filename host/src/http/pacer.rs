//! Page loads are paced: a few at a time, and at most [`PER_SECOND`] in all, the rest
//! waiting their turn. Answers come from a second-old cache, so serving them is cheap,
//! but not free: 50 clients loading pages as fast as they were answered (28,000 a second)
//! took the CPU of two cores from the workers (0.31x their jobs per second; `almanac bench
//! --page-loads 50`). Waiting costs nothing. `/healthz` and `/readyz` are not paced:
//! an orchestrator's probe must not queue behind a flood.
use std::time::Duration;

use tokio::sync::{Mutex, Semaphore};
use tokio::time::Instant;

/// Requests served at once.
const AT_ONCE: usize = 4;
/// Requests admitted per second, at most.
pub const PER_SECOND: u32 = 200;

pub struct Pacer {
    slots: Semaphore,
    next: Mutex<Instant>,
}

impl Default for Pacer {
    fn default() -> Pacer {
        Pacer { slots: Semaphore::new(AT_ONCE), next: Mutex::new(Instant::now()) }
    }
}

impl Pacer {
    /// Wait for a turn; the turn lasts as long as the permit is held.
    pub async fn turn(&self) -> tokio::sync::SemaphorePermit<'_> {
        let permit = self.slots.acquire().await.expect("the pacer's semaphore is never closed");
        let at = {
            let mut next = self.next.lock().await;
            let at = (*next).max(Instant::now());
            *next = at + Duration::from_secs(1) / PER_SECOND;
            at
        };
        tokio::time::sleep_until(at).await;
        permit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_are_spaced_and_few_at_once() {
        let pacer = Pacer::default();
        let started = Instant::now();
        for _ in 0..11 {
            drop(pacer.turn().await);
        }
        // Ten gaps of 5 ms at least between eleven turns (a lower bound: never early).
        assert!(started.elapsed() >= Duration::from_secs(10) / PER_SECOND);
        let held: Vec<_> = futures_util::future::join_all((0..AT_ONCE).map(|_| pacer.turn())).await;
        assert_eq!(pacer.slots.available_permits(), 0);
        drop(held);
        assert_eq!(pacer.slots.available_permits(), AT_ONCE);
    }
}
