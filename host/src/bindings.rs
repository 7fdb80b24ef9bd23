//! The one `bindgen!` of the host, for world `almanac:plugin/task-plugin@0.1.0`.
mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "task-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "almanac:plugin/db.transaction": crate::bindings::Transaction,
        },
    });
}

pub use generated::*;

/// The rep of the WIT `transaction` resource. It carries nothing: the call's database
/// state lives in its [`Session`](crate::capability::db::Session).
pub struct Transaction;

/// The WIT package version this host implements.
pub const WIT_VERSION: &str = "almanac:plugin@0.1.0";
