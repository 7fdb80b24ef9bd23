//! A private PostgreSQL cluster from the system's server binaries, for the demo, the
//! tests and the benchmark: no setup beyond having PostgreSQL installed (`server`); and a
//! PgBouncer in front of it, for the pooler's tests and benchmark (`bouncer`).
mod bouncer;
mod server;

pub use bouncer::Bouncer;
pub use server::{Cluster, ClusterError, Settings, PRIVATE_ROLE};
