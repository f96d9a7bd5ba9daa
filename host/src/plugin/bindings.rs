//! The one place that generates host bindings for the `weir:publisher` worlds.
//! Everything else imports these types from here.
//!
//! The host serves two versions of the package side by side: 0.2.0, which
//! streams tables in and out, and 0.1.0, frozen, for components built before it.

/// `weir:publisher@0.2.0`, the current contract (`wit/`).
pub mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "stream-publisher",
        imports: { default: trappable },
        with: { "weir:publisher/types.frames": crate::plugin::slots::SlotFrames },
    });
}

/// `weir:publisher@0.1.0` (`wit/v0.1.0/`), frozen.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "stream-publisher",
    });
}

/// The `weir:publisher` interfaces a component may import, every version the
/// host serves.
pub const HOST_INTERFACES: &[&str] = &[
    "weir:publisher/host@0.2.0",
    "weir:publisher/types@0.2.0",
    "weir:publisher/output@0.2.0",
    "weir:publisher/host@0.1.0",
    "weir:publisher/types@0.1.0",
];
