//! The one place that generates host bindings for the `weir:publisher` world.
//! Everything else imports these types from here.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "stream-publisher",
});

pub use self::weir::publisher::host::Level;
pub use self::weir::publisher::types::{OutputTable as RawOutputTable, PublishError as RawPublishError};

/// The package the host serves; a component's own import of the host interface
/// must name exactly this version.
pub const HOST_INTERFACE: &str = "weir:publisher/host@0.1.0";
