//! What one call's store holds: WASI (the host's clocks, no files), the memory cap, the capabilities
//! the call is lent, its stderr and its deadline.
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::capability::config::Settings;
use crate::capability::db::Session;
use crate::capability::log::Logger;

/// Raised by the memory limiter so a trap can be told apart from other traps.
#[derive(Debug, thiserror::Error)]
#[error("memory limit of {0} bytes exceeded")]
pub(super) struct MemoryExceeded(pub(super) usize);

/// The memory cap (per memory), and the bytes all the store's memories hold together (a
/// warm instance holding more than half the cap is not kept).
pub(super) struct MemoryCap {
    pub(super) cap: usize,
    pub(super) total: usize,
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.cap {
            return Err(MemoryExceeded(self.cap).into());
        }
        self.total = self.total + desired - current.min(desired);
        Ok(true)
    }
    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// A store's data for one call.
pub struct HostState {
    pub(super) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(super) limiter: MemoryCap,
    pub(super) db: Session,
    pub(super) log: Logger,
    pub(super) config: Settings,
    pub(super) today: crate::capability::business::Today,
    pub(super) stderr: super::stderr::Stderr,
    /// When the call must end; checked on every epoch tick.
    pub(super) deadline: Instant,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}
