//! The language a component was written in, as its build tools recorded it:
//! for `weir plugin list`, and so a tenant can tell its modules apart.
//!
//! No field says it outright. A componentize-py component links CPython as a
//! shared library (`libpython3.x.so`); ComponentizeJS records `JavaScript` in
//! the component's producers section (TypeScript is compiled to it first);
//! rustc and wit-bindgen-rust record themselves in a Rust module's. The first
//! two carry Rust inside them too (their runtimes), so they are asked first.

/// `Python`, `JavaScript`, `Rust`, the language the producers section names
/// first, or `unknown`.
pub fn language(bytes: &[u8]) -> String {
    let (mut python, mut named) = (false, Vec::<String>::new());
    let mut rust = false;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(wasmparser::Payload::ImportSection(imports)) => {
                python |= imports.into_imports().flatten().any(|i| i.module.starts_with("libpython"));
            }
            Ok(wasmparser::Payload::CustomSection(section)) if section.name() == "producers" => {
                let reader = wasmparser::BinaryReader::new(section.data(), section.data_offset());
                let Ok(fields) = wasmparser::ProducersSectionReader::new(reader) else { continue };
                for field in fields.into_iter().flatten() {
                    for value in field.values.into_iter().flatten() {
                        match field.name {
                            "language" => named.push(value.name.to_string()),
                            "processed-by" => rust |= value.name == "wit-bindgen-rust" || value.name == "rustc",
                            _ => {}
                        }
                    }
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let said = |language: &str| named.iter().any(|n| n == language);
    if python {
        "Python".into()
    } else if said("JavaScript") {
        "JavaScript".into()
    } else if rust || said("Rust") {
        "Rust".into()
    } else {
        named.into_iter().next().unwrap_or_else(|| "unknown".into())
    }
}
