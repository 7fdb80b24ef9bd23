//! How a host's workers share its tasks. Each worker takes the tasks in turn (skipping
//! those whose last claim found nothing), and no task holds more than its share of the
//! workers at once: four 20 s jobs of one task once made another plugin's job wait 19.6 s
//! with every worker taken.
//!
//! A task's share also shrinks while its jobs conflict with one another (deadlocks,
//! serialization failures: [`Lane`]), down to one worker, and grows back as they stop.
//! 200 jobs that lock two rows in opposite orders once ran at a hundredth of their serial
//! speed on eight workers: every worker queued on the same locks, and the deadlock
//! detector freed them one a second.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Workers that may run one task's batches at once: `limit` when given; else every
/// worker when the host serves one task, all but one when it serves more.
pub fn per_task(workers: usize, tasks: usize, limit: Option<usize>) -> usize {
    match limit {
        Some(limit) => limit.max(1),
        None if tasks > 1 => workers.saturating_sub(1).max(1),
        None => workers.max(1),
    }
}

/// Clean jobs a lowered task runs before its first raise.
const FIRST_PROBE: u32 = 8;
/// The most clean jobs a raise may wait for.
const LONGEST_PROBE: u32 = 4096;
/// A task lowered this long ago without a conflict since has its share back whole: its
/// jobs may have changed, or it ran too little to earn its raises.
const FORGET: std::time::Duration = std::time::Duration::from_secs(300);

/// One task's concurrency on this host: additive increase, multiplicative decrease.
/// A conflict halves the workers it may have (once per round: conflicts of batches that
/// began before the last cut were caused by the old level and do not cut again); each
/// `needed` clean jobs raise it by one. A conflict doubles `needed`, so a task whose
/// jobs always conflict probes a higher level ever more rarely (a deadlock costs its
/// workers a second of `deadlock_timeout`); two raises in a row without one halve it.
#[derive(Debug, Clone)]
struct Lane {
    running: usize,
    /// Workers it may have, below its share; None: not lowered.
    lowered: Option<usize>,
    needed: u32,
    clean: u32,
    /// Cuts so far: a batch remembers the round it began in.
    round: u64,
    cut_since_raise: bool,
    last_conflict: Option<std::time::Instant>,
}

impl Default for Lane {
    fn default() -> Self {
        Lane { running: 0, lowered: None, needed: FIRST_PROBE, clean: 0, round: 0, cut_since_raise: false, last_conflict: None }
    }
}

impl Lane {
    fn limit(&self, share: usize) -> usize {
        self.lowered.map_or(share, |l| l.min(share)).max(1)
    }

    fn conflict(&mut self, round: u64, share: usize) {
        if round != self.round {
            return;
        }
        self.lowered = Some((self.limit(share) / 2).max(1));
        self.round += 1;
        self.clean = 0;
        self.needed = self.needed.saturating_mul(2).min(LONGEST_PROBE);
        self.cut_since_raise = true;
        self.last_conflict = Some(std::time::Instant::now());
    }

    /// Its share back whole, if it was lowered [`FORGET`] ago and nothing conflicted since.
    fn forget_old_cut(&mut self) {
        if self.lowered.is_some() && self.last_conflict.is_some_and(|at| at.elapsed() >= FORGET) {
            *self = Lane { running: self.running, round: self.round, ..Lane::default() };
        }
    }

    /// `jobs` ran without a conflict. They count towards a raise only while the task
    /// had all the workers it may have: a level it did not use is not shown to be safe.
    fn clean(&mut self, jobs: u32, share: usize) {
        let Some(lowered) = self.lowered else { return };
        if self.running < self.limit(share) {
            return;
        }
        self.clean = self.clean.saturating_add(jobs);
        if self.clean < self.needed {
            return;
        }
        self.clean = 0;
        if !self.cut_since_raise {
            self.needed = (self.needed / 2).max(1);
        }
        self.cut_since_raise = false;
        self.lowered = Some(lowered + 1).filter(|l| *l < share);
        if self.lowered.is_none() {
            self.needed = FIRST_PROBE;
        }
    }
}

/// The workers running each task's batch now, and how many each task may have.
#[derive(Default)]
pub struct Busy {
    lanes: Mutex<HashMap<String, Lane>>,
    /// Told when a task's limit changes (the heartbeat says so soon: `crate::hosts`).
    pub changed: tokio::sync::Notify,
}

/// One worker's place in a task's share, given back when dropped.
pub struct Taken {
    busy: Arc<Busy>,
    task: String,
    share: usize,
    round: u64,
}

/// A task's concurrency now, as `status` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Concurrency {
    pub task: String,
    pub running: usize,
    /// Workers it may have now (its share, or less while its jobs conflict).
    pub limit: usize,
    pub share: usize,
}

impl Busy {
    fn lanes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lane>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more worker on `task`, unless it has `share` workers already, or
    /// fewer while its jobs conflict.
    pub fn take(self: &Arc<Self>, task: &str, share: usize) -> Option<Taken> {
        let mut lanes = self.lanes();
        let lane = lanes.entry(task.to_owned()).or_default();
        lane.forget_old_cut();
        if lane.running >= lane.limit(share) {
            return None;
        }
        lane.running += 1;
        Some(Taken { busy: self.clone(), task: task.to_owned(), share, round: lane.round })
    }

    /// Every task's concurrency, by name (those lowered, and those running now, with
    /// `share` the share of a task that runs nothing).
    pub fn concurrency(&self, share: usize) -> Vec<Concurrency> {
        let lanes = self.lanes();
        let mut all: Vec<Concurrency> = lanes
            .iter()
            .filter(|(_, l)| l.running > 0 || l.lowered.is_some())
            .map(|(task, l)| Concurrency { task: task.clone(), running: l.running, limit: l.limit(share), share })
            .collect();
        all.sort_by(|a, b| a.task.cmp(&b.task));
        all
    }
}

impl Taken {
    /// How the batch's jobs went: `clean` ended without a conflict, `conflicts` hit a
    /// deadlock or a serialization failure. Returns the task's limit before and after, if
    /// it changed.
    pub fn settle(&self, clean: usize, conflicts: usize) -> Option<(usize, usize)> {
        let mut lanes = self.busy.lanes();
        let lane = lanes.get_mut(&self.task)?;
        let before = lane.limit(self.share);
        if conflicts > 0 {
            lane.conflict(self.round, self.share);
        } else {
            lane.clean(u32::try_from(clean).unwrap_or(u32::MAX), self.share);
        }
        let after = lane.limit(self.share);
        if after == before {
            return None;
        }
        self.busy.changed.notify_one();
        Some((before, after))
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(lane) = self.busy.lanes().get_mut(&self.task) {
            lane.running = lane.running.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_holds_at_most_its_share() {
        assert_eq!(per_task(4, 1, None), 4);
        assert_eq!(per_task(4, 3, None), 3);
        assert_eq!(per_task(1, 3, None), 1);
        assert_eq!(per_task(8, 3, Some(2)), 2);
        let busy = Arc::new(Busy::default());
        let first = busy.take("a", 2).expect("one");
        let _second = busy.take("a", 2).expect("two");
        assert!(busy.take("a", 2).is_none(), "the third waits");
        assert!(busy.take("b", 2).is_some(), "another task is not held up");
        drop(first);
        assert!(busy.take("a", 2).is_some(), "a place given back is taken again");
    }

    #[test]
    fn conflicts_halve_a_task_once_a_round_down_to_one_and_clean_jobs_raise_it_back() {
        let busy = Arc::new(Busy::default());
        let limit = |busy: &Busy| busy.concurrency(8).iter().find(|c| c.task == "a").map_or(8, |c| c.limit);
        let places: Vec<Taken> = (0..8).map(|_| busy.take("a", 8).expect("a place")).collect();
        // Eight batches of one round conflict: one cut.
        for p in &places {
            p.settle(0, 1);
        }
        assert_eq!(limit(&busy), 4);
        drop(places);
        let taken: Vec<Taken> = (0..4).map(|_| busy.take("a", 8).expect("four places")).collect();
        assert!(busy.take("a", 8).is_none(), "a fifth waits");
        assert!(busy.take("b", 8).is_some(), "another task is not lowered");
        taken[0].settle(0, 1);
        drop(taken);
        let p = busy.take("a", 8).unwrap();
        p.settle(0, 1);
        drop(p);
        let p = busy.take("a", 8).unwrap();
        p.settle(0, 1);
        drop(p);
        assert_eq!(limit(&busy), 1, "never below one");
        let p = busy.take("a", 8).unwrap();
        assert!(busy.take("a", 8).is_none());
        // Four cuts: 8 * 2^4 clean jobs before the first raise.
        p.settle(127, 0);
        assert_eq!(limit(&busy), 1);
        p.settle(1, 0);
        assert_eq!(limit(&busy), 2);
        // A failed probe: back to one, and the next raise waits twice as long.
        p.settle(0, 1);
        assert_eq!(limit(&busy), 1);
        p.settle(255, 0);
        assert_eq!(limit(&busy), 1);
        p.settle(1, 0);
        assert_eq!(limit(&busy), 2);
        // A raise the task does not use is not earned: one worker alone on a level of two.
        for _ in 0..1000 {
            p.settle(1, 0);
        }
        assert_eq!(limit(&busy), 2, "clean jobs below the limit raise nothing");
        // Raises that hold, with every place in use, come ever sooner, up to the share.
        let mut places = vec![p];
        let mut raises = Vec::new();
        for _ in 0..2000 {
            while let Some(more) = busy.take("a", 8) {
                places.push(more);
            }
            places[0].settle(1, 0);
            raises.push(limit(&busy));
        }
        assert_eq!(limit(&busy), 8, "{raises:?}");
        assert!(busy.concurrency(8).iter().all(|c| c.task != "a" || c.running == places.len()));
    }
}
