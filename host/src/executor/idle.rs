//! How a worker with nothing to claim waits.
//!
//! Without LISTEN every idle worker polls, its delay doubling up to `poll_interval`.
//! With LISTEN a new job, a released task or a moved schedule is announced, so polling
//! only has to find what nothing announces: a retry or a slot coming due, a job whose
//! dependencies settled, a lost notification. One idle worker at a time (the poller)
//! asks the database when each task next has a job due (`peek.sql`, one statement) and
//! sleeps until then, a notification, or [`LONGEST_REST`]; the others wait for a
//! notification, or for the poller to wake them when its claim finds jobs. An idle host
//! then sends a statement or two a minute here instead of a claim a second.
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::db::{Pool, Sql};
use crate::executor::claims::SweepGate;
use crate::plugin::Loaded;

const PEEK: &str = include_str!("peek.sql");

/// The poller looks again after this long at the latest, whatever the peek said (a
/// notification lost with its connection).
pub const LONGEST_REST: Duration = Duration::from_secs(60);
/// A worker that is not the poller looks anyway after this long.
const OTHERS_REST: Duration = Duration::from_secs(600);
/// How often a waiting worker looks at this host's registry.
const REGISTRY_EVERY: Duration = Duration::from_secs(1);

/// Tasks whose last look found nothing, and until when they are not asked again (a
/// notification clears them all).
#[derive(Default)]
pub struct Quiet(HashMap<String, Instant>);

impl Quiet {
    pub fn open(&self, task: &str, now: Instant) -> bool {
        self.0.get(task).is_none_or(|until| *until <= now)
    }

    /// Not asked again for `rest`.
    pub fn rest(&mut self, task: String, rest: Duration) {
        self.0.insert(task, Instant::now() + rest);
    }

    /// When the first of `tasks` opens (now if one is open).
    fn first(&self, tasks: &[String]) -> Instant {
        let now = Instant::now();
        tasks.iter().map(|t| self.0.get(t).copied().unwrap_or(now)).min().unwrap_or(now + LONGEST_REST)
    }
}

/// What a waiting worker shares with the others.
pub struct Waiting<'a> {
    pub listening: bool,
    pub poll_interval: Duration,
    /// Taken by the one worker that looks without a notification.
    pub poller: &'a std::sync::atomic::AtomicBool,
    pub loaded: &'a Loaded,
    pub sweeping: &'a SweepGate,
    pub pool: &'a Pool,
}

/// Wait until there may be something to claim; returns whether the wait ended by time
/// (a poll) rather than a notification.
pub async fn wait(
    context: &Waiting<'_>,
    tasks: &[String],
    quiet: &mut Quiet,
    wake: &mut watch::Receiver<u64>,
    delay: &mut Duration,
    shutdown: &CancellationToken,
) -> bool {
    if !context.listening {
        let polled = !crate::wake::idle(wake, delay, context.poll_interval, shutdown).await;
        quiet.0.clear();
        return polled;
    }
    if context.poller.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
        let woken = until(context, wake, Instant::now() + OTHERS_REST, shutdown).await;
        quiet.0.clear();
        return woken == Woken::Time;
    }
    let deadline = match peek(context, tasks, quiet).await {
        Ok(()) => quiet.first(tasks),
        Err(e) => {
            tracing::debug!("idle peek: {e}");
            Instant::now() + context.poll_interval
        }
    };
    let woken = until(context, wake, deadline, shutdown).await;
    context.poller.store(false, Ordering::Release);
    if woken != Woken::Time {
        quiet.0.clear();
    }
    woken == Woken::Time
}

/// How a worker's wait ended.
#[derive(PartialEq)]
enum Woken {
    Notified,
    Time,
    /// The plugins were reloaded, suspended or resumed (or shutdown).
    Registry,
}

/// Until a notification, `deadline`, or a change of the plugins served, looked at on
/// this host's registry every second.
async fn until(context: &Waiting<'_>, wake: &mut watch::Receiver<u64>, deadline: Instant, shutdown: &CancellationToken) -> Woken {
    let served = crate::plugin::Served::now(context.loaded);
    match crate::wake::until(wake, deadline, REGISTRY_EVERY, || served.changed(context.loaded), shutdown).await {
        crate::wake::Woken::Notified | crate::wake::Woken::Closed => Woken::Notified,
        crate::wake::Woken::Time => Woken::Time,
        crate::wake::Woken::Changed | crate::wake::Woken::Shutdown => Woken::Registry,
    }
}

/// Rest each task until its next job is due (as the database says), or [`LONGEST_REST`]
/// when it has nothing pending or is held. One due now was not claimable: another host
/// runs it, it waits for `after`, this host's share of the task is full, or it lies below
/// a claim floor not asked since it came: a poll interval, and no longer than the floor
/// takes to be asked again.
async fn peek(context: &Waiting<'_>, tasks: &[String], quiet: &mut Quiet) -> Result<(), String> {
    if tasks.is_empty() {
        return Ok(());
    }
    let conn = context.pool.get().await.map_err(|e| e.to_string())?;
    let rows = conn.rows(PEEK, &[&tasks]).await.map_err(|e| crate::db::error_chain(&e))?;
    let due: HashMap<String, f64> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let now = Instant::now();
    for task in tasks {
        let rest = match due.get(task) {
            None => LONGEST_REST,
            Some(&secs) if secs <= 0.0 => {
                context.sweeping.worked();
                context.poll_interval.min(crate::history::FLOOR_EVERY)
            }
            Some(&secs) => Duration::try_from_secs_f64(secs).map_or(LONGEST_REST, |d| d.min(LONGEST_REST)),
        };
        quiet.0.insert(task.clone(), now + rest);
    }
    Ok(())
}
