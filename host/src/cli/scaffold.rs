//! `weir plugin new` and `weir plugin build`: a ready publisher project in
//! Rust, TypeScript, JavaScript or Python, and the one command that turns it
//! into a component.
//!
//! A new project carries what it needs to build outside this repository: the
//! WIT it implements, the language's weir SDK itself (vendored, as none is on
//! a registry), a sample input and a README with the next commands.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use weir::plugin::{compose, import_allowed};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Rust,
    Typescript,
    Javascript,
    Python,
}

const WIT: &str = include_str!("../../../wit/publisher.wit");
/// weir's columnar kernels (`weir:frames`), which `weir plugin build` composes in.
const KERNELS_WIT: &str = include_str!("../../../wit/frames/kernels.wit");
const SDK: &str = include_str!("../../../guest-examples/sdk/src/lib.rs");
const SDK_IPC: &str = include_str!("../../../guest-examples/sdk/src/ipc.rs");
const SAMPLE: &str = include_str!("../../../guest-examples/data/clicks.jsonl");
/// The sample's JSON Schema, which the scaffolded declaration names.
const SAMPLE_SCHEMA: &str = include_str!("../../../guest-examples/data/clicks.json");

/// The publisher's declaration, for `run-plugin --declaration` and `publisher register`.
fn declaration(name: &str) -> String {
    format!(
        "# The publisher, as `weir publisher register COLLECTION publisher.toml --plugin COMPONENT` takes it,\n\
         # and `weir run-plugin COMPONENT --declaration publisher.toml --input sample.jsonl` runs it locally.\n\
         name = \"{}\"\n\
         flush_interval_mins = 1\n\
         # The one output table, named after the topic: the plugin learns it as tables()[0].\n\
         output_tables = [\"clicks\"]\n\n\
         [source.kafka]\n\
         topic = \"clicks\"\n\
         data_format = \"json\"\n\
         schema = \"clicks.json\"\n\n\
         [source.kafka.src_cfg]\n\
         \"kafka.time_rollover_seconds\" = 10\n",
        name.replace('-', "_")
    )
}

/// The SDK's manifest outside the guest-examples workspace: the same crates
/// and versions as `guest-examples/Cargo.toml`.
const SDK_MANIFEST: &str = r#"[package]
name = "weir-guest"
version = "0.1.0"
description = "Write a weir publisher as an ordinary Rust function over Arrow record batches"
edition = "2024"
publish = false

[dependencies]
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc"] }
arrow-array = { version = "60", default-features = false }
arrow-buffer = { version = "60", default-features = false }
arrow-ipc = { version = "60", default-features = false }
arrow-schema = { version = "60", default-features = false }
arrow-select = { version = "60", default-features = false }
arrow-data = { version = "60", default-features = false }
"#;

const RUST_LIB: &str = r#"//! A weir publisher: every row of the batch, unchanged, into the table its
//! declaration names. It streams: a record batch in, the same rows out, then
//! the next, so it holds one frame at a time whatever the batch's size.

use weir_guest::{Frames, Output, Result};

fn publish(slots: Vec<Frames>, output: &mut Output) -> Result<()> {
    // The output table: a stream publisher writes exactly one, named after its
    // topic, so this code serves any topic.
    let table = &weir_guest::tables()?[0];
    for batch in slots.into_iter().flatten() {
        output.write(table, &batch?)?;
    }
    Ok(())
}

weir_guest::export_stream_publisher!(publish);
"#;

const PYTHON_APP: &str = r#""""A weir publisher: every row of the input into the table its declaration
names, through weir's dataframe API (`weir.frame`: expressions shaped like
Polars', evaluated by compiled kernels inside the component, so no row
becomes a Python object). Shape the rows on the way, for example:

    from weir.frame import col, when

    kept = frame.filter(col("duration_ms") >= 100)
    kept = kept.with_columns((col("duration_ms") / 1000).alias("duration_s"))

Raise ValueError for input it cannot handle (a kernel's error does too);
print() goes to the plugin's log. Built by `weir plugin build` with
componentize-py, the kernels composed in."""
import weir
from weir.frame import frames


@weir.publisher
def publish(slots):
    rows = 0
    # The output table: a stream publisher writes exactly one, named after its
    # topic, so this code serves any topic.
    table = weir.tables()[0]
    for frame in frames(slots[0]):  # a weir.frame.Frame at a time
        weir.write(table, frame)
        rows += frame.height
    weir.log(f"{rows} rows from {slots[0].source} published to {table}")
"#;

/// The Python SDK, vendored into each project as the package `weir/`.
const PYTHON_SDK: [(&str, &str); 7] = [
    ("__init__.py", include_str!("../../../guest-examples/python/weir/__init__.py")),
    ("_flatbuf.py", include_str!("../../../guest-examples/python/weir/_flatbuf.py")),
    ("array.py", include_str!("../../../guest-examples/python/weir/array.py")),
    ("batch.py", include_str!("../../../guest-examples/python/weir/batch.py")),
    ("frame.py", include_str!("../../../guest-examples/python/weir/frame.py")),
    ("ipc.py", include_str!("../../../guest-examples/python/weir/ipc.py")),
    ("types.py", include_str!("../../../guest-examples/python/weir/types.py")),
];

const JS_APP: &str = r#"// A weir publisher: every row of the input into the table its declaration
// names, through weir's dataframe API ('weir/frame': expressions shaped like
// Polars', evaluated by compiled kernels inside the component, so no row
// becomes a JavaScript value). Shape the rows on the way, for example:
//
//   import { col } from 'weir/frame';
//   const kept = frame.filter(col('duration_ms').gtEq(100))
//     .withColumns(col('duration_ms').divideBy(1000).alias('duration_s'));
//
// Throw InvalidInput for input it cannot handle (a kernel's error does too);
// console.log goes to the plugin's log. Built by `weir plugin build`, the
// kernels composed in.
import { InvalidInput, log, publisher, tables, write } from 'weir';
import { frames } from 'weir/frame';

export const publish = publisher((slots) => {
  let rows = 0;
  // The output table: a stream publisher writes exactly one, named after its
  // topic, so this code serves any topic.
  const table = tables()[0];
  for (const frame of frames(slots[0])) {
    write(table, frame);
    rows += frame.height;
  }
  log(`${rows} rows from ${slots[0].source} published to ${table}`);
});
"#;

/// The TypeScript/JavaScript SDK, vendored into each project as `weir/`, and
/// the npm packages it is pinned to.
const JS_SDK: [(&str, &str); 4] = [
    ("index.ts", include_str!("../../../guest-examples/js/weir/index.ts")),
    ("frame.ts", include_str!("../../../guest-examples/js/weir/frame.ts")),
    ("world.d.ts", include_str!("../../../guest-examples/js/weir/world.d.ts")),
    ("build.mjs", include_str!("../../../guest-examples/js/weir/build.mjs")),
];
const JS_PACKAGE: &str = include_str!("../../../guest-examples/js/package.json");
const JS_LOCK: &str = include_str!("../../../guest-examples/js/package-lock.json");
const JS_TSCONFIG: &str = include_str!("../../../guest-examples/js/tsconfig.json");

fn readme(name: &str, language: Language) -> String {
    let what = match language {
        Language::Rust => "Rust, with the weir-guest SDK (in `weir-guest/`)",
        Language::Typescript => {
            "TypeScript, with weir's SDK (in `weir/`: a dataframe API over weir's compiled kernels, and apache-arrow for rows), built with componentize-js"
        }
        Language::Javascript => {
            "JavaScript, with weir's SDK (in `weir/`: a dataframe API over weir's compiled kernels, and apache-arrow for rows), built with componentize-js"
        }
        Language::Python => {
            "Python, with weir's SDK (in `weir/`: a dataframe API over weir's compiled kernels, and Arrow in pure Python for rows), built with componentize-py (CPython in the component)"
        }
    };
    format!(
        "# {name}\n\nA weir stream publisher in {what}. It implements `weir:publisher@0.2.1` (`wit/`).\n\n\
         ```sh\n\
         weir plugin build .                                   # prints the component's path, size and world\n\
         weir run-plugin <component> --declaration publisher.toml --input sample.jsonl --output-dir out/\n\
         #   runs it on the sample as the server would: decoded with the declared schema, its table checked\n\
         #   (add --expect expected.jsonl to hold its output to the rows you expect: a test for CI)\n\
         weir plugin push <component> --name {name}          # upload it to a weir server, by name\n\
         ```\n\n\
         The code names no topic and no table: it writes the table its publisher declares (`tables()[0]`), \
         so one build serves any topic. `publisher.toml` declares the topic, the format and its schema \
         (`clicks.json`); change them to yours. The SDK reference is weir's `docs/sdk.md`.\n"
    )
}

/// The files of a new project, relative to its directory.
fn files(name: &str, language: Language) -> Vec<(PathBuf, String)> {
    let mut files = vec![
        (PathBuf::from("README.md"), readme(name, language)),
        (PathBuf::from("sample.jsonl"), SAMPLE.to_string()),
        (PathBuf::from("clicks.json"), SAMPLE_SCHEMA.to_string()),
        (PathBuf::from("publisher.toml"), declaration(name)),
        (PathBuf::from(".gitignore"), "target/\n*.wasm\n__pycache__/\nnode_modules/\n".to_string()),
    ];
    match language {
        Language::Rust => {
            let manifest = format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
                 [lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nweir-guest = {{ path = \"weir-guest\" }}\n\n\
                 # Small and fast components (what weir's own examples measured).\n\
                 [profile.release]\nopt-level = \"s\"\nlto = true\ncodegen-units = 1\nstrip = true\npanic = \"abort\"\n\n\
                 # A workspace of its own, wherever it is put.\n[workspace]\n"
            );
            files.extend([
                (PathBuf::from("Cargo.toml"), manifest),
                (PathBuf::from("src/lib.rs"), RUST_LIB.to_string()),
                (PathBuf::from("weir-guest/Cargo.toml"), SDK_MANIFEST.to_string()),
                (PathBuf::from("weir-guest/src/lib.rs"), SDK.replace("path: \"../../wit\"", "path: \"wit\"")),
                (
                    PathBuf::from("weir-guest/src/ipc.rs"),
                    SDK_IPC.replace("\n//! Shared by the Rust SDK and weir's columnar kernels (`#[path]` there).", ""),
                ),
                (PathBuf::from("weir-guest/wit/publisher.wit"), WIT.to_string()),
            ]);
        }
        Language::Python => {
            files.push((PathBuf::from("app.py"), PYTHON_APP.to_string()));
            files.extend([
                (PathBuf::from("wit/publisher.wit"), WIT.to_string()),
                (PathBuf::from("wit/frames/kernels.wit"), KERNELS_WIT.to_string()),
                (PathBuf::from("wit/frames/deps/publisher.wit"), WIT.to_string()),
            ]);
            files.extend(PYTHON_SDK.iter().map(|(file, text)| (Path::new("weir").join(file), text.to_string())));
        }
        Language::Typescript | Language::Javascript => {
            // The same code is TypeScript too: the SDK's types reach `slots` through `publisher`.
            let app = if language == Language::Typescript { "app.ts" } else { "app.js" };
            // The SDK's own package name and description are the project's.
            let package = |text: &str| {
                text.replace("\"weir-js-guests\"", &format!("{name:?}")).replace(
                    "weir's publisher SDK for TypeScript and JavaScript (weir/), its examples and hostile fixtures",
                    "A weir stream publisher",
                )
            };
            files.extend([
                (PathBuf::from(app), JS_APP.to_string()),
                (PathBuf::from("package.json"), package(JS_PACKAGE)),
                (PathBuf::from("package-lock.json"), package(JS_LOCK)),
                (PathBuf::from("tsconfig.json"), JS_TSCONFIG.to_string()),
                (PathBuf::from("wit/publisher.wit"), WIT.to_string()),
                (PathBuf::from("wit/frames/kernels.wit"), KERNELS_WIT.to_string()),
                (PathBuf::from("wit/frames/deps/publisher.wit"), WIT.to_string()),
            ]);
            files.extend(JS_SDK.iter().map(|(file, text)| (Path::new("weir").join(file), text.to_string())));
        }
    }
    files
}

/// `weir plugin new NAME --language L [--dir DIR]`.
pub fn new(name: &str, language: Language, dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !valid {
        bail!("{name:?} is not a valid plugin name: use lowercase letters, digits, `_` or `-`, starting with a letter");
    }
    let root = dir.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(name));
    if root.exists() && std::fs::read_dir(&root).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} already exists and is not empty: choose another name or --dir", root.display());
    }
    for (path, text) in files(name, language) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a file in the project"))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(root)
}

/// What `weir plugin build` made.
pub struct Built {
    pub path: PathBuf,
    pub size: u64,
    pub world: String,
}

/// `weir plugin build [DIR]`: the right toolchain for the project in `dir`.
pub fn build(dir: &Path) -> anyhow::Result<Built> {
    let path = if dir.join("Cargo.toml").exists() {
        build_rust(dir)?
    } else if dir.join("package.json").exists() {
        build_js(dir)?
    } else if dir.join("app.py").exists() {
        build_python(dir)?
    } else {
        bail!(
            "{} holds no publisher project (a Cargo.toml, a package.json or an app.py): make one with `weir plugin new NAME --language rust|typescript|javascript|python`",
            dir.display()
        );
    };
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let world = world(&bytes)?;
    Ok(Built { path, size: bytes.len() as u64, world })
}

fn missing(tool: &str, install: &str) -> impl FnOnce(std::io::Error) -> anyhow::Error {
    let (tool, install) = (tool.to_string(), install.to_string());
    move |e| anyhow::anyhow!("cannot run {tool} ({e}): {install}")
}

fn build_rust(dir: &Path) -> anyhow::Result<PathBuf> {
    let target_installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).lines().any(|t| t == "wasm32-wasip2"))
        .unwrap_or(true);
    if !target_installed {
        bail!("the Rust target wasm32-wasip2 is not installed: run `rustup target add wasm32-wasip2`");
    }
    let out = Command::new("cargo")
        .args(["build", "--release", "--target", "wasm32-wasip2", "--message-format=json-render-diagnostics"])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(missing(
            "cargo",
            "install Rust with rustup (https://rustup.rs), then `rustup target add wasm32-wasip2`",
        ))?;
    if !out.status.success() {
        let stale = rust_component(dir).filter(|path| std::fs::remove_file(path).is_ok());
        bail!("cargo could not build {} (its errors are above){}", dir.display(), removed(stale.as_deref()));
    }
    // The component is the cdylib artifact cargo reports, wherever the target directory is.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .rfind(|f| f.extension().is_some_and(|e| e == "wasm"))
        .context("cargo built no .wasm: the crate needs `crate-type = [\"cdylib\"]`")
}

/// Where cargo puts the project's component: its cdylib, in its target directory.
fn rust_component(dir: &Path) -> Option<PathBuf> {
    let out = Command::new("cargo")
        .args(["metadata", "--no-deps", "--format-version", "1", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .output()
        .ok()?;
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let target = metadata["target_directory"].as_str()?;
    let targets =
        metadata["packages"].as_array()?.iter().flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default());
    let name = targets
        .filter(|t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "cdylib")))
        .find_map(|t| t["name"].as_str().map(|n| n.replace('-', "_")))?;
    Some(Path::new(target).join("wasm32-wasip2/release").join(format!("{name}.wasm")))
}

/// What a failed build says of the component it would have replaced, which
/// is removed so that nothing runs the code from before by mistake.
fn removed(stale: Option<&Path>) -> String {
    stale.map_or(String::new(), |path| {
        format!("; the component the last build left, {}, is removed so that nothing runs stale code", path.display())
    })
}

/// Removes `wasm` (the last build's component) when a build failed, and says so.
fn remove_stale(wasm: &Path) -> String {
    removed(std::fs::remove_file(wasm).is_ok().then_some(wasm))
}

/// `<dir>/<dir's name>.wasm`, where the script-language builds put the component.
fn component_path(dir: &Path) -> PathBuf {
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().replace('-', "_")))
        .unwrap_or_else(|| "plugin".into());
    dir.join(format!("{name}.wasm"))
}

/// Output lines worth showing from a failed build: not the stack frames.
fn reason(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && !l.trim_start().starts_with("at "))
        .take(30)
        .collect();
    lines.join("\n")
}

/// What componentize-py's failure says about the author's code: the error
/// the app raised while it was imported (a syntax error, an import that
/// fails), as Python shows it, with the project's paths (componentize-py
/// mounts the project at `/0`) and without componentize-py's own traceback.
fn python_reason(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    if text.contains("has no attribute 'WitWorld'") {
        return "app.py defines no publisher: put `@weir.publisher` on the function that takes the batch's slots \
                (with `import weir` at the top)"
            .into();
    }
    let Some(start) = text.find("AssertionError: ") else { return reason(output) };
    let raised = &text[start + "AssertionError: ".len()..];
    let raised = raised.split("\n\nCaused by:").next().unwrap_or(raised);
    raised.replace("File \"/0/", "File \"").trim_end().to_string()
}

fn build_js(dir: &Path) -> anyhow::Result<PathBuf> {
    const NODE: &str = "install Node.js 20 or later, with npm";
    if !dir.join("node_modules").exists() {
        eprintln!("installing the npm packages of {} (once)", dir.display());
        let install = if dir.join("package-lock.json").exists() { "ci" } else { "install" };
        let out = Command::new("npm")
            .args([install, "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"])
            .current_dir(dir)
            .output()
            .map_err(missing("npm", NODE))?;
        if !out.status.success() {
            bail!("npm could not install the packages of {}:\n{}", dir.display(), reason(&out.stderr));
        }
    }
    let wasm = component_path(dir);
    let out = Command::new("node")
        .arg(dir.join("weir/build.mjs"))
        .arg(dir)
        .arg(&wasm)
        .output()
        .map_err(missing("node", NODE))?;
    if !out.status.success() {
        let stale = remove_stale(&wasm);
        bail!("the build of {} failed{stale}:\n{}", dir.display(), reason(&out.stderr));
    }
    compose_kernels(&wasm)?;
    Ok(wasm)
}

/// Composes weir's columnar kernels into the component at `wasm` when it imports them.
fn compose_kernels(wasm: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    if compose::imports_kernels(&bytes)? {
        let composed = compose::with_kernels(&bytes).context("composing the kernels into the component")?;
        std::fs::write(wasm, composed).with_context(|| format!("writing {}", wasm.display()))?;
    }
    Ok(())
}

fn build_python(dir: &Path) -> anyhow::Result<PathBuf> {
    let wasm = component_path(dir);
    // An app that uses the kernels (`weir.frame`) is built against the world that imports them.
    let (wit, world) = compose::python_world(dir);
    let out = Command::new("componentize-py")
        .args(["-d", wit, "-w", world, "componentize", "app", "-p", ".", "-o"])
        .arg(wasm.file_name().expect("a file name"))
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .map_err(missing("componentize-py", "install it with `pip install componentize-py==0.25.0`"))?;
    if !out.status.success() {
        let stale = remove_stale(&wasm);
        bail!("componentize-py could not build {}{stale}:\n{}", dir.display(), python_reason(&out.stderr));
    }
    compose_kernels(&wasm)?;
    Ok(wasm)
}

/// The `weir:publisher` version a component imports, after checking that weir
/// would take every import it has.
fn world(bytes: &[u8]) -> anyhow::Result<String> {
    let mut version = None;
    for name in compose::imports(bytes)? {
        if !import_allowed(&name) {
            bail!(
                "the component imports `{name}`, which weir refuses: a publisher may import weir:publisher and WASI 0.2"
            );
        }
        if let Some((_, v)) = name.strip_prefix("weir:publisher/").and_then(|n| n.split_once('@')) {
            version = Some(v.to_string());
        }
    }
    Ok(format!("weir:publisher@{}", version.as_deref().unwrap_or("0.2.1")))
}
