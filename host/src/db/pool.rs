//! A pool of connections to one [`Target`], and the connections it lends. Whether the
//! target is a transaction pooler travels with them: a pooled connection's statements
//! must not outlive their transaction (see `sql`), and a pooled and a direct host can
//! live in one process.
use std::ops::{Deref, DerefMut};
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
        Ok(Conn { inner: self.inner.get().await?, pooled: self.pooled })
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

/// A connection lent by a [`Pool`]; back to it when dropped.
pub struct Conn {
    inner: Object,
    pooled: bool,
}

impl Conn {
    /// Whether this connection leads through a transaction pooler.
    pub fn pooled(&self) -> bool {
        self.pooled
    }

    /// The pool this connection came from.
    pub fn pool(&self) -> Option<Pool> {
        Object::pool(&self.inner).map(|inner| Pool { inner, pooled: self.pooled })
    }

    /// Close this connection instead of returning it to its pool: it may be
    /// mid-transaction or carry a cancel request.
    pub fn close(self) {
        drop(Object::take(self.inner));
    }
}

impl Deref for Conn {
    type Target = ClientWrapper;
    fn deref(&self) -> &ClientWrapper {
        &self.inner
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut ClientWrapper {
        &mut self.inner
    }
}
