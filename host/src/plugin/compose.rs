//! Composing a publisher with the components it imports, as `wac plug` does:
//! each import of the publisher that one of `plugs` exports is satisfied by
//! an instance of that plug, inside the one component that comes out. The
//! kernels (`weir:frames/kernels`) reach a Python, TypeScript or JavaScript
//! publisher this way (`weir plugin build`): the result runs in one sandbox,
//! its imports those of its parts minus the ones plugged.

use anyhow::Context as _;
use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions};

/// The kernels component (`guest-examples/kernels`, built with weir).
pub const KERNELS: &[u8] = include_bytes!(env!("WEIR_KERNELS_WASM"));

/// The names `component` imports that grant something (not a world's `use`
/// of a type or resource, which only names one), read from its bytes without
/// compiling it.
pub fn imports(component: &[u8]) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    // Payloads of nested modules and components come inline, each opened by a
    // `Version` and closed by an `End`: only the outermost component's imports count.
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        match payload.context("the component is malformed")? {
            wasmparser::Payload::Version { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            wasmparser::Payload::ComponentImportSection(imports) if depth == 1 => {
                for import in imports {
                    let import = import.context("the component is malformed")?;
                    if !matches!(import.ty, wasmparser::ComponentTypeRef::Type(_)) {
                        names.push(import.name.name.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(names)
}

/// Whether `component` imports the kernels (and so needs them composed in).
pub fn imports_kernels(component: &[u8]) -> anyhow::Result<bool> {
    Ok(imports(component)?.iter().any(|name| name.starts_with("weir:frames/")))
}

/// Whether the Python project in `dir` uses the kernels (`weir.frame`), and
/// so is built against the world that imports them (`wit/frames`, world
/// `publisher`): componentize-py binds every import of the world it is given,
/// used or not, so the choice is made from the sources, before building.
/// The SDK's own package (`weir/`) is not the project's code.
fn python_imports_kernels(dir: &std::path::Path) -> bool {
    let uses = |text: &str| {
        text.lines().map(str::trim_start).any(|line| {
            line.starts_with("from weir.frame ")
                || line.starts_with("import weir.frame")
                || line.strip_prefix("from weir import ").is_some_and(|names| {
                    names.split(|c: char| !c.is_alphanumeric() && c != '_').any(|name| name == "frame")
                })
        })
    };
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && !matches!(name.to_str(), Some("weir" | "__pycache__" | "node_modules" | "target")) {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "py")
                && std::fs::read_to_string(&path).is_ok_and(|text| uses(&text))
            {
                return true;
            }
        }
    }
    false
}

/// The WIT directory (relative to the project's or the repository's root)
/// and the world componentize-py builds the Python project in `dir` against.
pub fn python_world(dir: &std::path::Path) -> (&'static str, &'static str) {
    if python_imports_kernels(dir) { ("wit/frames", "publisher") } else { ("wit", "stream-publisher") }
}

/// `component` with the kernels composed in.
pub fn with_kernels(component: &[u8]) -> anyhow::Result<Vec<u8>> {
    plug(component, &[("kernels", KERNELS)])
}

/// `socket` with its imports that `plugs` (`(name, component)`) export
/// plugged by them.
pub fn plug(socket: &[u8], plugs: &[(&str, &[u8])]) -> anyhow::Result<Vec<u8>> {
    let mut graph = CompositionGraph::new();
    let socket = Package::from_bytes("weir:publisher", None, socket.to_vec(), graph.types_mut())
        .context("reading the publisher's component")?;
    let socket = graph.register_package(socket)?;
    let mut ids = Vec::with_capacity(plugs.len());
    for (name, bytes) in plugs {
        let package = Package::from_bytes(&format!("plug:{name}"), None, bytes.to_vec(), graph.types_mut())
            .with_context(|| format!("reading the component {name}"))?;
        ids.push(graph.register_package(package)?);
    }
    wac_graph::plug(&mut graph, ids, socket).context("plugging the publisher's imports")?;
    graph.encode(EncodeOptions::default()).context("encoding the composed component")
}
