//! The one place that generates host bindings for the `weir:publisher` worlds.
//! Everything else imports these types from here.
//!
//! The host serves the package's versions side by side: 0.2.1, the current
//! one, which also serves components built against 0.2.0 (0.2.1 only adds to
//! it, and wasmtime links a 0.2.0 import to a 0.2.1 instance), and 0.1.0,
//! frozen, for components built before 0.2.0.

/// `weir:publisher@0.2.1`, the current contract (`wit/`).
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
/// host serves (`weir --version` names them too).
pub const HOST_INTERFACES: &[&str] = &[
    "weir:publisher/host@0.2.1",
    "weir:publisher/types@0.2.1",
    "weir:publisher/output@0.2.1",
    "weir:publisher/host@0.2.0",
    "weir:publisher/types@0.2.0",
    "weir:publisher/output@0.2.0",
    "weir:publisher/host@0.1.0",
    "weir:publisher/types@0.1.0",
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_names_every_contract_served() {
        for interface in super::HOST_INTERFACES {
            let version = interface.rsplit_once('@').expect("a versioned interface").1;
            assert!(crate::VERSION.contains(version), "{version} is served but `weir --version` does not say so");
        }
    }
}
