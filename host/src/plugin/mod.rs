//! Loading plugins and calling them: the runtime (engine, linker, cache of compiled
//! code) and each loaded plugin (`runtime`), what it allows (`limits`), what can fail
//! (`error`), what a call's store holds (`state`) and its stderr (`stderr`), the
//! WIT worlds a component may be built for (`world`), and the plugins a host serves
//! now (`registry`).
mod error;
mod limits;
mod registry;
mod runtime;
mod state;
mod stderr;
mod world;

pub use crate::task::TaskSpec;
pub use error::{CallError, LoadError};
pub use limits::Limits;
pub use registry::{Loaded, Registry, Served};
pub use runtime::{Called, Plugin, PluginFile, Runtime};
pub use state::HostState;
