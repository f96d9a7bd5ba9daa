//! Loading: whatever is uploaded, either a linked plugin or an error that says
//! what is wrong with the file, and the compiled-artifact cache.

mod common;

use weir::plugin::{LoadError, Origin, Runtime, RuntimeConfig};

use common::{guest, runtime};

fn load_err(rt: &Runtime, bytes: &[u8]) -> LoadError {
    rt.load(bytes).err().expect("the load is refused")
}

#[test]
fn garbage_is_not_wasm() {
    let err = load_err(&runtime(), b"#!/bin/sh\necho pwned\n");
    assert!(matches!(err, LoadError::NotWasm), "{err:?}");
    assert!(err.to_string().contains("cargo build --release --target wasm32-wasip2"));
}

#[test]
fn truncated_component_is_malformed() {
    let bytes = guest("read-clicks");
    let err = load_err(&runtime(), &bytes[..bytes.len() / 2]);
    let LoadError::Malformed { reason } = &err else { panic!("{err:?}") };
    assert!(reason.starts_with("failed to parse WebAssembly"), "{reason}");
    assert!(err.to_string().starts_with("the component is malformed: "));
}

#[test]
fn core_module_is_not_a_component() {
    let module = wat::parse_str(r#"(module (func (export "publish")))"#).unwrap();
    let err = load_err(&runtime(), &module);
    assert!(matches!(err, LoadError::CoreModule), "{err:?}");
    assert!(err.to_string().contains("build the plugin for the `wasm32-wasip2` target"));
}

#[test]
fn component_without_publish_is_the_wrong_world() {
    let err = load_err(&runtime(), &wat::parse_str("(component)").unwrap());
    let LoadError::WrongWorld { reason } = &err else { panic!("{err:?}") };
    assert!(reason.contains("publish"), "{reason}");
    assert!(err.to_string().starts_with(
        "the component does not implement the `weir:publisher/stream-publisher` world, version 0.2.x or 0.1.0"
    ));
}

#[test]
fn publish_of_the_wrong_type_is_the_wrong_world() {
    let component = wat::parse_str(
        r#"(component
            (core module $m (func (export "f") (param i32) (result i32) local.get 0))
            (core instance $i (instantiate $m))
            (func (export "publish") (param "x" u32) (result u32) (canon lift (core func $i "f"))))"#,
    )
    .unwrap();
    let err = load_err(&runtime(), &component);
    let LoadError::WrongWorld { reason } = &err else { panic!("{err:?}") };
    assert!(reason.contains("publish"), "{reason}");
}

#[test]
fn forbidden_import_is_named() {
    let component = wat::parse_str(r#"(component (import "evil:net/exfiltrate@1.0.0" (instance)))"#).unwrap();
    let err = load_err(&runtime(), &component);
    let LoadError::ForbiddenImport { import } = &err else { panic!("{err:?}") };
    assert_eq!(import, "evil:net/exfiltrate@1.0.0");
}

#[test]
fn oversized_upload_is_refused_before_parsing() {
    let rt = Runtime::new(RuntimeConfig { max_module_bytes: 1024, ..RuntimeConfig::default() }).unwrap();
    let err = load_err(&rt, &guest("read-clicks"));
    assert!(matches!(err, LoadError::TooLarge { limit: 1024, .. }), "{err:?}");
}

#[test]
fn a_precompiled_artifact_is_never_accepted() {
    let rt = runtime();
    let compiled = rt.engine().precompile_component(&guest("read-clicks")).unwrap();
    let err = load_err(&rt, &compiled);
    assert!(matches!(err, LoadError::NotWasm), "{err:?}");
}

#[test]
fn second_load_comes_from_the_artifact_cache_and_a_torn_artifact_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig { cache_dir: Some(dir.path().to_path_buf()), ..RuntimeConfig::default() };
    let bytes = guest("hostile-abort");

    let first = Runtime::new(config.clone()).unwrap().load(&bytes).unwrap();
    assert_eq!(first.origin(), Origin::Compiled);
    let second = Runtime::new(config.clone()).unwrap().load(&bytes).unwrap();
    assert_eq!(second.origin(), Origin::Cached);
    assert_eq!(first.digest(), second.digest());
    assert!(first.digest().starts_with("sha256:"));

    // Damage the artifact: the next load compiles again rather than failing or trusting it.
    let artifact = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    assert!(artifact.file_name().unwrap().to_str().unwrap().starts_with(first.digest().trim_start_matches("sha256:")));
    std::fs::write(&artifact, b"torn").unwrap();
    let third = Runtime::new(config).unwrap().load(&bytes).unwrap();
    assert_eq!(third.origin(), Origin::Compiled);
}
