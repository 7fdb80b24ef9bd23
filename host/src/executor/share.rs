//! How a host's workers share its tasks. Each worker takes the tasks in turn (skipping
//! those whose last claim found nothing), and no task holds more than its share of the
//! workers at once: four 20 s jobs of one task once made another plugin's job wait 19.6 s
//! with every worker taken.
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

/// The workers running each task's batch now.
#[derive(Default)]
pub struct Busy(Mutex<HashMap<String, usize>>);

/// One worker's place in a task's share, given back when dropped.
pub struct Taken {
    busy: Arc<Busy>,
    task: String,
}

impl Busy {
    /// A place for one more worker on `task`, unless `limit` are on it already.
    pub fn take(self: &Arc<Self>, task: &str, limit: usize) -> Option<Taken> {
        let mut running = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = running.entry(task.to_owned()).or_default();
        if *now >= limit {
            return None;
        }
        *now += 1;
        Some(Taken { busy: self.clone(), task: task.to_owned() })
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        let mut running = self.busy.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(now) = running.get_mut(&self.task) {
            *now = now.saturating_sub(1);
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
}
