//! The host's `bindgen!`s: world `task-plugin` of `almanac:plugin@0.5.0`, and of 0.4.0, 0.3.0,
//! 0.2.0 and 0.1.0 so that components built against them keep loading and running unchanged. All
//! share the `types` interface's Rust types (the records are identical), so the
//! capabilities implement each interface once and the older imports delegate to it
//! ([`crate::plugin`]'s `world` module).
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

/// World `task-plugin` of `almanac:plugin@0.4.0`.
pub mod v0_4 {
    mod generated {
        wasmtime::component::bindgen!({
            path: "../wit/0.4.0",
            world: "task-plugin",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "almanac:plugin/types": crate::bindings::almanac::plugin::types,
                "almanac:plugin/db.transaction": crate::bindings::Transaction,
            },
        });
    }

    pub use generated::*;
}

/// World `task-plugin` of `almanac:plugin@0.3.0`.
pub mod v0_3 {
    mod generated {
        wasmtime::component::bindgen!({
            path: "../wit/0.3.0",
            world: "task-plugin",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "almanac:plugin/types": crate::bindings::almanac::plugin::types,
                "almanac:plugin/db.transaction": crate::bindings::Transaction,
            },
        });
    }

    pub use generated::*;
}

/// World `task-plugin` of `almanac:plugin@0.2.0`.
pub mod v0_2 {
    mod generated {
        wasmtime::component::bindgen!({
            path: "../wit/0.2.0",
            world: "task-plugin",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "almanac:plugin/types": crate::bindings::almanac::plugin::types,
                "almanac:plugin/db.transaction": crate::bindings::Transaction,
            },
        });
    }

    pub use generated::*;
}

/// World `task-plugin` of `almanac:plugin@0.1.0`.
pub mod v0_1 {
    mod generated {
        wasmtime::component::bindgen!({
            path: "../wit/0.1.0",
            world: "task-plugin",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "almanac:plugin/types": crate::bindings::almanac::plugin::types,
                "almanac:plugin/db.transaction": crate::bindings::Transaction,
            },
        });
    }

    pub use generated::*;
}

/// The rep of the WIT `transaction` resource. It carries nothing: the call's database
/// state lives in its [`Session`](crate::capability::db::Session).
pub struct Transaction;

/// The WIT package versions this host implements, newest first.
pub const WIT_VERSIONS: [&str; 5] = ["almanac:plugin@0.5.0", "almanac:plugin@0.4.0", "almanac:plugin@0.3.0", "almanac:plugin@0.2.0", "almanac:plugin@0.1.0"];
