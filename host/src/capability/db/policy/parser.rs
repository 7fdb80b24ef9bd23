//! Where statements are parsed: threads of the policy's own, never the wasm fiber a
//! plugin call runs on. libpg_query bounds its own recursion (100 kB of stack), but
//! decoding its tree, walking it and dropping it recurse once per level in Rust; on a
//! fiber's small stack a 10 KB chain of `+` aborted the whole host. Here the stack is
//! sized for the deepest tree the walk's budget lets through, with room to spare.
//!
//! The threads take work by turns, one piece per task in turn, not in arrival order: a
//! plugin flooding the parser with unique statements once made another plugin's first
//! statements wait nine times as long.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

/// Stack of each parser thread. Reserved address space; only what a parse touches is
/// ever resident.
const STACK: usize = 256 << 20;
/// Parses that can run at once, which also bounds the memory parsing can take.
const THREADS: usize = 2;

type Work = Box<dyn FnOnce() + Send>;

/// Work waiting, per task, and whose turn comes next.
#[derive(Default)]
struct Queue {
    waiting: HashMap<String, VecDeque<Work>>,
    turns: VecDeque<String>,
    closed: bool,
}

impl Queue {
    /// The next piece of work: the first of the task whose turn it is, which goes to the
    /// back of the line if it has more.
    fn next(&mut self) -> Option<Work> {
        let who = self.turns.pop_front()?;
        let queue = self.waiting.get_mut(&who)?;
        let work = queue.pop_front();
        if queue.is_empty() {
            self.waiting.remove(&who);
        } else {
            self.turns.push_back(who);
        }
        work
    }
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

/// A small pool of big-stack threads.
pub struct Parser {
    shared: Shared,
}

impl Parser {
    pub fn new() -> Parser {
        let shared: Shared = Arc::default();
        for i in 0..THREADS {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("almanac-parse-{i}"))
                .stack_size(STACK)
                .spawn(move || loop {
                    let work = {
                        let (queue, ready) = &*shared;
                        let mut queue = queue.lock().unwrap_or_else(|e| e.into_inner());
                        loop {
                            if let Some(work) = queue.next() {
                                break work;
                            }
                            if queue.closed {
                                return;
                            }
                            queue = ready.wait(queue).unwrap_or_else(|e| e.into_inner());
                        }
                    };
                    work();
                })
                .expect("spawn a parser thread");
        }
        Parser { shared }
    }

    /// Run `f` for `who` (a task) on a parser thread and wait for it without blocking
    /// the async thread.
    pub async fn run<T: Send + 'static>(&self, who: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(
            who,
            Box::new(move || {
                let _ = tx.send(f());
            }),
        );
        rx.await.expect("a parser thread ended")
    }

    /// Run `f` on a parser thread and block until it returns (outside async code).
    pub fn run_blocking<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.send(
            "",
            Box::new(move || {
                let _ = tx.send(f());
            }),
        );
        rx.recv().expect("a parser thread ended")
    }

    fn send(&self, who: &str, work: Work) {
        let (queue, ready) = &*self.shared;
        let mut queue = queue.lock().unwrap_or_else(|e| e.into_inner());
        let waiting = queue.waiting.entry(who.to_owned()).or_default();
        let first = waiting.is_empty();
        waiting.push_back(work);
        if first {
            queue.turns.push_back(who.to_owned());
        }
        ready.notify_one();
    }
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Drop for Parser {
    fn drop(&mut self) {
        let (queue, ready) = &*self.shared;
        queue.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_from_one_task_does_not_hold_up_another() {
        let parser = Parser::new();
        let done = Arc::new(Mutex::new(Vec::new()));
        // Both threads held at a gate by the flood's first two pieces.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let (started, running) = std::sync::mpsc::channel::<()>();
        for i in 0..10 {
            let (done, gate, started) = (done.clone(), gate.clone(), started.clone());
            parser.send(
                "flood",
                Box::new(move || {
                    if i < 2 {
                        started.send(()).unwrap();
                        gate.lock().unwrap().recv().unwrap();
                    }
                    done.lock().unwrap().push(format!("flood-{i}"));
                }),
            );
        }
        running.recv().unwrap();
        running.recv().unwrap();
        let (finished, last) = std::sync::mpsc::channel::<()>();
        {
            let (done, finished) = (done.clone(), finished.clone());
            parser.send(
                "other",
                Box::new(move || {
                    done.lock().unwrap().push("other".into());
                    finished.send(()).unwrap();
                }),
            );
        }
        parser.send("flood", Box::new(move || finished.send(()).unwrap()));
        open.send(()).unwrap();
        open.send(()).unwrap();
        last.recv().unwrap();
        last.recv().unwrap();
        let order = done.lock().unwrap().clone();
        let at = order.iter().position(|w| w == "other").unwrap();
        assert!(at <= 3, "the other task's statement waited behind the flood: {order:?}");
    }
}
