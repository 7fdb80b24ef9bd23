//! Where statements are parsed: threads of the policy's own, never the wasm fiber a
//! plugin call runs on. libpg_query bounds its own recursion (100 kB of stack), but
//! decoding its tree, walking it and dropping it recurse once per level in Rust; on a
//! fiber's small stack a 10 KB chain of `+` aborted the whole host. Here the stack is
//! sized for the deepest tree the walk's budget lets through, with room to spare.
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Stack of each parser thread. Reserved address space; only what a parse touches is
/// ever resident.
const STACK: usize = 256 << 20;
/// Parses that can run at once, which also bounds the memory parsing can take.
const THREADS: usize = 2;

type Work = Box<dyn FnOnce() + Send>;

/// A small pool of big-stack threads.
pub struct Parser {
    work: Mutex<mpsc::Sender<Work>>,
}

impl Parser {
    pub fn new() -> Parser {
        let (tx, rx) = mpsc::channel::<Work>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..THREADS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("almanac-parse-{i}"))
                .stack_size(STACK)
                .spawn(move || loop {
                    // The lock is held only while waiting for the next piece of work.
                    let next = rx.lock().map(|rx| rx.recv());
                    match next {
                        Ok(Ok(work)) => work(),
                        _ => return,
                    }
                })
                .expect("spawn a parser thread");
        }
        Parser { work: Mutex::new(tx) }
    }

    /// Run `f` on a parser thread and wait for it without blocking the async thread.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Box::new(move || {
            let _ = tx.send(f());
        }));
        rx.await.expect("a parser thread ended")
    }

    /// Run `f` on a parser thread and block until it returns (outside async code).
    pub fn run_blocking<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Box::new(move || {
            let _ = tx.send(f());
        }));
        rx.recv().expect("a parser thread ended")
    }

    fn send(&self, work: Work) {
        self.work.lock().expect("parser queue").send(work).expect("parser threads are running");
    }
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}
