//! A job: one unit of work, `(task, slot, key)`, and how an attempt at it ends.

/// The longest job key, in bytes. A key is part of the primary key, whose btree refuses
/// entries over ~2.7 kB; a plan returning a longer one fails as the plan's fault, clearly.
pub const MAX_KEY_BYTES: usize = 1024;

/// How one job attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    Done,
    /// Failed; will be tried again after a backoff.
    Retried,
    /// Failed for good (permanent error, out of attempts, or its hosts kept dying).
    Failed,
}
