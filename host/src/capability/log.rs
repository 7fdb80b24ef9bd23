//! The WIT `log` interface: plugin log lines in the host's tracing, under the plugin's
//! name and the fields of the job being run. Each call has a budget of lines and bytes
//! (ten million `log` calls once wrote 2.7 GB of host log in 40 s); past it, lines are
//! dropped and the drop is said once.
use crate::bindings::almanac::plugin::log::{Host, Level};
use crate::text::{clip, printable, MAX_LOG_LINE};

/// Lines one call may log.
pub const MAX_LINES: u32 = 100;
/// Bytes one call may log, all lines together.
pub const MAX_BYTES: usize = 64 << 10;

/// Who a call is for, attached to the plugin's log lines.
#[derive(Debug, Clone, Default)]
pub struct CallFields {
    pub plugin: String,
    pub task: String,
    pub slot: String,
    pub key: String,
}

/// What one call has logged so far.
#[derive(Debug, Default)]
struct Budget {
    lines: u32,
    bytes: usize,
    exhausted: bool,
}

/// The log side of one plugin call.
#[derive(Debug, Default)]
pub struct Logger {
    fields: CallFields,
    budget: Budget,
}

impl Logger {
    pub fn new(fields: CallFields) -> Logger {
        // A key comes from whoever enqueued the job: printable too.
        let fields = CallFields { key: printable(&fields.key).into_owned(), ..fields };
        Logger { fields, budget: Budget::default() }
    }
}

impl Host for Logger {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let f = &self.fields;
        let budget = &mut self.budget;
        if budget.exhausted {
            return Ok(());
        }
        let message = printable(&clip(message, MAX_LOG_LINE)).into_owned();
        budget.lines += 1;
        budget.bytes += message.len();
        if budget.lines > MAX_LINES || budget.bytes > MAX_BYTES {
            budget.exhausted = true;
            tracing::warn!(
                target: "plugin", plugin = %f.plugin, task = %f.task, slot = %f.slot, key = %f.key,
                "log budget of this call spent ({MAX_LINES} lines or {} KiB); its further lines are dropped", MAX_BYTES >> 10
            );
            return Ok(());
        }
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
