//! The WIT `db` interface: the `transaction` resource a call is lent.
//!
//! Every statement runs on the connection of the job (or planning step) that made the
//! call, inside the host's open transaction. The resource itself carries nothing: the
//! state lives in [`Session`], which exists only for the duration of one call.
pub mod policy;
pub mod session;
pub mod value;

use wasmtime::component::Resource;

use crate::bindings::almanac::plugin::db::{Host, HostTransaction};
use crate::bindings::almanac::plugin::types::{DbError, Rows, Value};
use crate::bindings::Transaction;
pub use policy::Policy;
pub use session::{Ending, Lent, Session, Trace, Traced, Who, END_CALL, TRACE_KEPT};
pub use value::db_error;

/// Whether an error says nothing about the statement or the job: a deadlock or a
/// serialization failure (the job ran into another at the wrong moment), an admin
/// shutdown, a crash or a recovering server (57P01, 57P02, 57P03), a lost connection
/// (class 08). The executor retries these on a budget of their own
/// ([`crate::executor::transient`]).
pub fn transient_sqlstate(code: &str) -> bool {
    conflict_sqlstate(code) || matches!(code, "57P01" | "57P02" | "57P03") || code.starts_with("08")
}

/// Whether an error is a job's conflict with another (a serialization failure, a
/// deadlock): the transient errors that lower a task's concurrency
/// ([`crate::executor::share`]), unlike a server that went away.
pub fn conflict_sqlstate(code: &str) -> bool {
    matches!(code, "40001" | "40P01")
}

// The WIT interfaces are implemented on the call's session itself (linked with
// `HasSelf<Session>` in `plugin`), so this module needs nothing from the runtime.
impl Host for Session {}

impl crate::bindings::almanac::plugin::types::Host for Session {}

impl HostTransaction for Session {
    async fn query(&mut self, _tx: Resource<Transaction>, sql: String, params: Vec<Value>) -> wasmtime::Result<Result<Rows, DbError>> {
        Session::query(self, sql, params, Who::Plugin).await
    }

    async fn execute(&mut self, _tx: Resource<Transaction>, sql: String, params: Vec<Value>) -> wasmtime::Result<Result<u64, DbError>> {
        Session::execute(self, sql, params, Who::Plugin).await
    }

    /// Guests are only ever lent a borrow, which they cannot drop; the entry in the
    /// call's resource table goes with the call's store.
    async fn drop(&mut self, _tx: Resource<Transaction>) -> wasmtime::Result<()> {
        Ok(())
    }
}
