//! A pool of connections to one [`Target`], and the connections it lends. Whether the
//! target is a transaction pooler travels with them: a pooled connection's statements
//! must not outlive their transaction (see `sql`), and a pooled and a direct host can
//! live in one process.
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{ClientWrapper, Manager, ManagerConfig, Object, PoolError, RecyclingMethod, Runtime};

use super::error::DbError;
use super::target::Target;

#[derive(Clone)]
pub struct Pool {
    inner: deadpool_postgres::Pool,
    pooled: bool,
}

impl Pool {
    pub fn new(target: &Target, size: usize) -> Result<Pool, DbError> {
        let manager = Manager::from_config(target.config.clone(), target.tls.clone(), ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let inner = deadpool_postgres::Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(Duration::from_secs(10)))
            .wait_timeout(Some(Duration::from_secs(60)))
            .build()
            .map_err(|e| DbError::Pool(e.to_string()))?;
        Ok(Pool { inner, pooled: target.pooled })
    }

    pub async fn get(&self) -> Result<Conn, PoolError> {
        Ok(Conn { inner: Some(self.inner.get().await?), pooled: self.pooled, open: AtomicBool::new(false) })
    }

    /// Whether the target is a transaction pooler.
    pub fn pooled(&self) -> bool {
        self.pooled
    }

    /// Close connections unused for a while.
    pub fn retain(&self, mut keep: impl FnMut(deadpool_postgres::Metrics) -> bool) {
        self.inner.retain(|_, metrics| keep(metrics));
    }
}

/// A connection lent by a [`Pool`]; back to it when dropped, unless a transaction may
/// still be open on it ([`Conn::in_transaction`]).
pub struct Conn {
    /// `None` only once closed.
    inner: Option<Object>,
    pooled: bool,
    /// Marked by its user for the length of a transaction it opened by hand.
    open: AtomicBool,
}

impl Drop for Conn {
    /// A connection dropped inside a transaction (a panic unwinding through the batch or
    /// the action that opened it) is closed: lent again, the next user's statements would
    /// run in that transaction, and its COMMIT commit what was left half done.
    fn drop(&mut self) {
        if *self.open.get_mut() {
            if let Some(inner) = self.inner.take() {
                drop(Object::take(inner));
            }
        }
    }
}

impl Conn {
    /// Say that a transaction was opened on this connection (`true`) or ended (`false`).
    /// Dropped while one is open, the connection is closed, not returned to its pool.
    pub fn in_transaction(&self, open: bool) {
        self.open.store(open, Ordering::Release);
    }

    /// Whether this connection leads through a transaction pooler.
    pub fn pooled(&self) -> bool {
        self.pooled
    }

    /// The pool this connection came from.
    pub fn pool(&self) -> Option<Pool> {
        Object::pool(self.object()).map(|inner| Pool { inner, pooled: self.pooled })
    }

    /// Close this connection instead of returning it to its pool: it may be
    /// mid-transaction or carry a cancel request.
    pub fn close(self) {
        self.in_transaction(true);
    }

    fn object(&self) -> &Object {
        self.inner.as_ref().expect("a connection is lent until dropped")
    }
}

impl Deref for Conn {
    type Target = ClientWrapper;
    fn deref(&self) -> &ClientWrapper {
        self.object()
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut ClientWrapper {
        self.inner.as_mut().expect("a connection is lent until dropped")
    }
}
