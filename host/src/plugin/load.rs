//! Turning uploaded bytes into a runnable plugin: size and format checks, the
//! import allow-list, the world check. Compilation goes through the artifact
//! cache; a precompiled artifact is never taken from a user (only `\0asm`
//! component bytes get past [`check_bytes`]).

use wasmtime::Engine;
use wasmtime::component::types::{ComponentExtern, ComponentItem};
use wasmtime::component::{Component, ComponentExportIndex, Linker};

use super::bindings::{HOST_INTERFACES, v0_1, v0_2};
use super::error::LoadError;
use super::sandbox::Sandbox;

const WASM_MAGIC: [u8; 4] = *b"\0asm";
/// Bytes 6..8 of the preamble: the layer. Core modules are layer 0, components layer 1.
const COMPONENT_LAYER: [u8; 2] = [1, 0];

/// Rejects what is plainly not a component, before any parsing.
pub fn check_bytes(bytes: &[u8], max_size: usize) -> Result<(), LoadError> {
    if bytes.len() > max_size {
        return Err(LoadError::TooLarge { size: bytes.len(), limit: max_size });
    }
    if bytes.len() < 8 || bytes[..4] != WASM_MAGIC {
        return Err(LoadError::NotWasm);
    }
    if bytes[6..8] != COMPONENT_LAYER {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

/// The WASI 0.2 interfaces a publisher may import. Each is served with an empty
/// context (no files, no environment, no network), but Rust's standard library
/// links several of them even when a plugin never uses them, and CPython's
/// libc (componentize-py) links the sockets: they are linked, and every socket
/// a plugin asks for is refused (no TCP, no UDP, no name lookup, no address
/// allowed; see `Sandbox::new`).
const WASI_ALLOWED: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];

/// Whether a component may import the interface named `name` (`ns:pkg/iface@version`).
pub fn import_allowed(name: &str) -> bool {
    if HOST_INTERFACES.contains(&name) {
        return true;
    }
    match name.split_once('@') {
        Some((interface, version)) => version.starts_with("0.2.") && WASI_ALLOWED.contains(&interface),
        None => false,
    }
}

/// A component linked against the world version it implements.
#[derive(Clone)]
pub enum Linked {
    /// With the 0.2 version the component was built against.
    V0_2(v0_2::StreamPublisherPre<Sandbox>, &'static str),
    /// With where its `publish` export is: it is called through its typed
    /// export, not the generated `call_publish`, whose parameter type would
    /// make every frame a `Vec` of its own.
    V0_1(v0_1::StreamPublisherPre<Sandbox>, ComponentExportIndex),
}

/// Checks a compiled component against the allow-list and the world (0.2.x,
/// else 0.1.0), and links it.
pub fn link(engine: &Engine, linker: &Linker<Sandbox>, component: &Component) -> Result<Linked, LoadError> {
    let ty = component.component_type();
    // A type import (a world's `use` of a type or resource, such as 0.2.0's
    // `frames`) names a type; it grants nothing.
    let grants = |item: &ComponentExtern| !matches!(item.ty, ComponentItem::Type(_) | ComponentItem::Resource(_));
    if let Some((import, _)) = ty.imports(engine).find(|(name, item)| grants(item) && !import_allowed(name)) {
        return Err(match import.starts_with("weir:frames/") {
            true => LoadError::KernelsNotComposed { import: import.to_string() },
            false => LoadError::ForbiddenImport { import: import.to_string() },
        });
    }
    let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld { reason: format!("{e:#}") };
    let pre = linker.instantiate_pre(component).map_err(wrong_world)?;
    let imports = |version: &str| {
        ty.imports(engine).any(|(name, _)| name.starts_with("weir:publisher/") && name.ends_with(version))
    };
    let v0_2 = match v0_2::StreamPublisherPre::new(pre.clone()) {
        Ok(pre) => return Ok(Linked::V0_2(pre, if imports("@0.2.1") { "0.2.1" } else { "0.2.0" })),
        Err(e) => e,
    };
    // A component that imports nothing of 0.2 may be a 0.1.0 publisher; one
    // that does is reported against 0.2, the version it was built for.
    let imports_v0_2 = imports("@0.2.0") || imports("@0.2.1");
    match v0_1::StreamPublisherPre::new(pre) {
        Ok(pre) if !imports_v0_2 => {
            let publish = component.get_export_index(None, "publish").expect("the world's check found `publish`");
            Ok(Linked::V0_1(pre, publish))
        }
        _ => Err(wrong_world(v0_2)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list() {
        assert!(import_allowed("weir:publisher/host@0.1.0"));
        assert!(import_allowed("weir:publisher/host@0.2.0"));
        assert!(import_allowed("weir:publisher/output@0.2.0"));
        assert!(import_allowed("weir:publisher/output@0.2.1"));
        assert!(!import_allowed("weir:publisher/output@0.2.2"));
        assert!(import_allowed("wasi:cli/environment@0.2.3"));
        assert!(!import_allowed("wasi:cli/environment@0.3.0"));
        assert!(import_allowed("wasi:sockets/tcp@0.2.0"));
        assert!(!import_allowed("wasi:sockets/tcp@0.3.0"));
        assert!(!import_allowed("wasi:http/outgoing-handler@0.2.0"));
        assert!(!import_allowed("weir:publisher/host@0.3.0"));
        assert!(!import_allowed("weir:publisher/output@0.1.0"));
        assert!(!import_allowed("evil"));
    }

    #[test]
    fn byte_checks() {
        assert!(matches!(check_bytes(b"hello world", 100), Err(LoadError::NotWasm)));
        assert!(matches!(check_bytes(b"\0asm", 100), Err(LoadError::NotWasm)));
        assert!(matches!(check_bytes(b"\0asm\x01\0\0\0", 100), Err(LoadError::CoreModule)));
        assert!(matches!(check_bytes(b"\0asm\x0d\0\x01\0", 100), Ok(())));
        assert!(matches!(check_bytes(&[0; 200], 100), Err(LoadError::TooLarge { size: 200, limit: 100 })));
        // A precompiled artifact (an ELF file) is never accepted.
        assert!(matches!(check_bytes(b"\x7fELF\x02\x01\x01\0", 100), Err(LoadError::NotWasm)));
    }
}
