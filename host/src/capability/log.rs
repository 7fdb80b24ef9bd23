//! The WIT `log` interface: plugin log lines in the host's tracing, under the plugin's
//! name and the fields of the job being run.
use crate::bindings::almanac::plugin::log::{Host, Level};
use crate::plugin::HostState;

/// Longest plugin log message kept, in bytes; the rest is cut.
const MAX_MESSAGE: usize = 4096;

impl Host for HostState {
    async fn log(&mut self, level: Level, mut message: String) -> wasmtime::Result<()> {
        if message.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str("…");
        }
        let f = &self.fields;
        macro_rules! emit {
            ($level:expr) => {
                tracing::event!(target: "plugin", $level, plugin = %f.plugin, task = %f.task, slot = %f.slot, key = %f.key, "{message}")
            };
        }
        match level {
            Level::Trace => emit!(tracing::Level::TRACE),
            Level::Debug => emit!(tracing::Level::DEBUG),
            Level::Info => emit!(tracing::Level::INFO),
            Level::Warn => emit!(tracing::Level::WARN),
            Level::Error => emit!(tracing::Level::ERROR),
        }
        Ok(())
    }
}
