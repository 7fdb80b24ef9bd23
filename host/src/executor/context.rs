//! What a host's executor is set to ([`Options`]) and what every batch of one worker
//! shares ([`Context`]).
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::claims;
use super::share;
use super::transient;
use crate::login::Logins;
use crate::plugin::Loaded;

/// Executor settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Concurrent workers, each with its own connection. Defaults to 4.
    pub workers: usize,
    /// The most jobs claimed per transaction. Each worker starts a task at one and
    /// doubles while claims come back full ([`super::batch::next_size`]). Defaults to 32; 1 is
    /// one job per transaction.
    pub batch: usize,
    /// A batch starts no job after running this long; the rest go back pending.
    /// Defaults to 2 s.
    pub batch_time: Duration,
    /// First retry delay; doubles per attempt, with jitter. Defaults to 1 s.
    pub retry_base: Duration,
    /// Longest retry delay. Defaults to 1 h.
    pub retry_max: Duration,
    /// Polling interval when idle and no notification arrives. Defaults to 1 s.
    pub poll_interval: Duration,
    /// A LISTEN connection wakes idle workers: only one of them looks without a
    /// notification, at when the database says the next job comes due ([`super::idle`]).
    /// Defaults to false (every worker polls every `poll_interval`).
    pub listening: bool,
    /// A job whose host (or connection) ended this many times while running it is
    /// failed without running again, so it cannot take down host after host.
    /// Defaults to 3.
    pub poison_after: i32,
    /// A task charged with `poison_after` server crashes within this long is held.
    /// Defaults to 24 h.
    pub poison_window: Duration,
    /// How often orphaned claims are swept (`claims::sweep`). Defaults to 1 s.
    pub sweep_interval: Duration,
    /// Workers one task's batches may hold at once ([`share::per_task`]). Defaults to
    /// all but one when the host serves more than one task, else all.
    pub task_workers: Option<usize>,
    /// Transient interruptions (a deadlock, a serialization failure, a server that
    /// went away) a job may have before it fails: a budget of their own, never counted
    /// against the task's `max_attempts`. Defaults to [`transient::BUDGET`].
    pub transient_retries: i32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 4,
            batch: 32,
            batch_time: Duration::from_secs(2),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            listening: false,
            poison_after: 3,
            poison_window: Duration::from_secs(24 * 3600),
            sweep_interval: Duration::from_secs(1),
            task_workers: None,
            transient_retries: transient::BUDGET,
        }
    }
}

impl Options {
    /// What the claims sweep counts against.
    pub fn budgets(&self) -> claims::Budgets {
        claims::Budgets { transient: self.transient_retries, poison_after: self.poison_after, poison_window: self.poison_window }
    }
}

/// What every batch of one worker shares.
pub struct Context {
    /// This host, as its claims and the attempts it records name it.
    pub host: String,
    pub loaded: Arc<Loaded>,
    pub options: Options,
    pub recorder: claims::Recorder,
    pub floor: crate::history::ClaimFloor,
    /// Where each task's jobs run: sessions of its login.
    pub logins: Arc<Logins>,
    /// The workers on each task now.
    pub busy: Arc<share::Busy>,
    /// Held by the sweep running now ([`claims::sweep_once`]), with the batches running.
    pub sweeping: Arc<claims::SweepGate>,
    /// Wakes the idle workers: every notification, a poll that found jobs, a task's
    /// concurrency raised.
    pub nudge: watch::Sender<u64>,
    /// Taken by the idle worker that looks without a notification ([`super::idle::wait`]).
    pub poller: std::sync::atomic::AtomicBool,
}
