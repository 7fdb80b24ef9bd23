//! Retry delays, for jobs and outbox messages alike.
use std::time::Duration;

use rand::Rng;

/// Exponential backoff with "equal jitter": `base * 2^(attempt-1)` capped at `max`, half
/// of it fixed and half random, so work that failed together (a receiver that was down,
/// a lock held for a while) retries spread out rather than in a stampede.
pub fn delay(base: Duration, max: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let delay = exp.min(max);
    let half = delay / 2;
    half + half.mul_f64(rand::rng().random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_is_capped() {
        for attempt in 1..40 {
            let d = delay(Duration::from_secs(1), Duration::from_secs(60), attempt);
            let full = Duration::from_secs(1u64 << (attempt - 1).min(20)).min(Duration::from_secs(60));
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?} not in [{:?}, {full:?}]", full / 2);
        }
    }
}
