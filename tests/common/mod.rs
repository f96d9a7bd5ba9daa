//! Helpers shared by the integration tests: the built guest components, a
//! runtime with a shared artifact cache, and table generators.
#![allow(dead_code)]

pub mod delta;
pub mod many;
pub mod peers;
pub mod postgres;
pub mod relay;
pub mod s3;
pub mod serve;
pub mod stream;
pub mod tansu;
pub mod tls;

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Float64Array, Int32Array, Int64Array, ListBuilder, RecordBatch,
    StringArray, StringBuilder, StructArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir::plugin::frames;
use weir::plugin::{Declared, Runtime, RuntimeConfig};

/// A loopback port nothing listens on (yet).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// CPU time (user and system) the process `pid` has used so far.
pub fn cpu_of(pid: u32) -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // utime and stime are fields 14 and 15; the command name before them may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the running system.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(std::time::Duration::from_micros(ticks * 1_000_000 / per_s))
}

/// Time thread `tid` of process `pid` has run so far, as the scheduler
/// counts it (to the nanosecond: `/proc/…/stat` counts whole clock ticks,
/// which a thread that runs for microseconds at a time rarely gets charged).
pub fn run_time_of_thread(pid: u32, tid: u32) -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    Some(std::time::Duration::from_nanos(stat.split_whitespace().next()?.parse().ok()?))
}

/// Waits until something accepts connections at `address`.
pub fn wait_for_listener(address: &str) {
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(address).is_err() {
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "nothing listens on {address}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Where host/build.rs put the components built from guest-examples/.
pub fn guests_dir() -> PathBuf {
    PathBuf::from(env!("WEIR_GUESTS_DIR"))
}

/// A guest component by crate name (`read-clicks`, `hostile-panic`, ...).
pub fn guest_path(name: &str) -> PathBuf {
    guests_dir().join(format!("{}.wasm", name.replace('-', "_")))
}

/// A Python guest (`guest-examples/python/<name>/app.py`, with the SDK beside
/// it) built with componentize-py (installed by scripts/setup.sh), with the
/// kernels composed in when it uses them, as `weir plugin build` builds it.
pub fn python_guest(name: &str) -> Vec<u8> {
    std::fs::read(python_guest_path(name)).unwrap()
}

/// Where [`python_guest`] builds it.
pub fn python_guest_path(name: &str) -> PathBuf {
    built_guest("python", name, true, |source, wasm| {
        let sdk = source.ancestors().find(|d| d.join("weir/__init__.py").exists()).expect("the Python SDK");
        let (wit, world) = weir::plugin::compose::python_world(source);
        let mut build = std::process::Command::new("componentize-py");
        build.arg("-d").arg(repo().join(wit)).args(["-w", world, "componentize", "app", "-p", "."]);
        build.arg("-p").arg(sdk).arg("-o").arg(wasm).current_dir(source).env("PYTHONDONTWRITEBYTECODE", "1");
        build
    })
}

/// A JavaScript or TypeScript guest (`guest-examples/js/<name>/`) built by
/// the SDK's build script (its npm packages installed by scripts/setup.sh),
/// with the kernels composed in when it uses them, as `weir plugin build` builds it.
pub fn js_guest(name: &str) -> Vec<u8> {
    std::fs::read(js_guest_path(name)).unwrap()
}

/// Where [`js_guest`] builds it.
pub fn js_guest_path(name: &str) -> PathBuf {
    built_guest("js", name, true, js_build)
}

/// A JavaScript or TypeScript guest as the SDK's build script leaves it:
/// without the kernels composed in, even when it imports them.
pub fn js_guest_uncomposed(name: &str) -> Vec<u8> {
    std::fs::read(built_guest("js", name, false, js_build)).unwrap()
}

fn js_build(source: &std::path::Path, wasm: &std::path::Path) -> std::process::Command {
    let mut build = std::process::Command::new("node");
    build.arg(repo().join("guest-examples/js/weir/build.mjs")).arg(source).arg(wasm);
    build
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A guest of another language, built once per change of its sources (or its
/// SDK's) into the guests directory, whichever test asks first; with the
/// kernels composed in where it imports them and `compose` says so.
fn built_guest(
    language: &str,
    name: &str,
    compose: bool,
    command: impl FnOnce(&std::path::Path, &std::path::Path) -> std::process::Command,
) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let root = repo().join("guest-examples").join(language);
    let source = root.join(name);
    assert!(source.is_dir(), "no guest {}", source.display());
    // What the component is made of: the guest, the SDK (all of `root` but the other guests) and the WIT.
    let mut hasher = std::hash::DefaultHasher::new();
    let mut files = Vec::new();
    for dir in [root.join("weir"), source.clone(), repo().join("wit")] {
        let mut stack = vec![dir];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let (path, kind) = (entry.path(), entry.file_type().unwrap());
                let skipped = ["node_modules", "__pycache__", "dist"].iter().any(|s| path.ends_with(s));
                if kind.is_dir() && !skipped {
                    stack.push(path);
                } else if kind.is_file() {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    for file in files {
        // Relative: clones elsewhere that share the build directory share the components.
        file.strip_prefix(repo()).unwrap_or(&file).hash(&mut hasher);
        std::fs::read(&file).unwrap().hash(&mut hasher);
    }
    let out = guests_dir().join(language);
    std::fs::create_dir_all(&out).unwrap();
    if compose {
        // The kernels it may be composed with (built by host/build.rs).
        weir::plugin::compose::KERNELS.hash(&mut hasher);
    }
    let bare = if compose { "" } else { "-uncomposed" };
    let wasm = out.join(format!("{}{bare}-{:016x}.wasm", name.replace('/', "-"), hasher.finish()));
    if !wasm.exists() {
        // Each build its own partial file: tests of one process may build one guest at once.
        static BUILDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let build = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let partial = out.join(format!(".{}-{}-{build}.wasm", name.replace('/', "-"), std::process::id()));
        let built = command(&source, &partial)
            .output()
            .unwrap_or_else(|e| panic!("building {name}: {e} (scripts/setup.sh installs the toolchain)"));
        assert!(
            built.status.success(),
            "building {language} guest {name} failed:\n{}{}",
            String::from_utf8_lossy(&built.stdout),
            String::from_utf8_lossy(&built.stderr)
        );
        let bytes = std::fs::read(&partial).unwrap();
        if compose && weir::plugin::compose::imports_kernels(&bytes).unwrap() {
            let composed = weir::plugin::compose::with_kernels(&bytes).expect("the kernels compose in");
            std::fs::write(&partial, composed).unwrap();
        }
        std::fs::rename(&partial, &wasm).unwrap();
        // The builds this one supersedes (of other sources), once a day old: another clone may still use them.
        let stem = format!("{}{bare}-", name.replace('/', "-"));
        for entry in std::fs::read_dir(&out).into_iter().flatten().flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let superseded = file
                .strip_prefix(&stem)
                .and_then(|rest| rest.strip_suffix(".wasm"))
                .is_some_and(|hash| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()));
            if superseded && older_than(&entry, 86_400) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    wasm
}

/// `sha256:<hex>` of a file, as the server names a module.
pub fn digest_of(path: &str) -> String {
    weir::plugin::digest(&std::fs::read(path).unwrap())
}

pub fn guest(name: &str) -> Vec<u8> {
    let path = guest_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e} (host/build.rs builds it)", path.display()))
}

/// Runs a future to its end on a runtime of its own (producing to a broker from a plain test).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// What a stream publisher reading topic `clicks` declares: its one source and
/// the tables it may write.
pub fn declared(tables: &[&str]) -> Declared {
    Declared::new(vec!["clicks".into()], tables.iter().map(|t| t.to_string()).collect())
}

/// A runtime whose artifact cache is shared by all test processes, so each
/// component is compiled once per test run.
pub fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig { cache_dir: Some(shared_cache()), ..RuntimeConfig::default() }).expect("runtime")
}

/// The shared artifact cache. Each change of a guest, of its SDK or of
/// wasmtime compiles new components into it, so once a process, those
/// compiled more than three days ago are removed (left alone, the cache
/// reached 23 GB here); a test that wants one again compiles it again.
pub fn shared_cache() -> PathBuf {
    let dir = guests_dir().join("test-artifact-cache");
    static PRUNED: std::sync::Once = std::sync::Once::new();
    PRUNED.call_once(|| {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten().filter(|e| older_than(e, 3 * 86_400)) {
            // Another test process may be reading it: it compiles the component again.
            let _ = std::fs::remove_file(entry.path());
        }
    });
    dir
}

/// Whether the file was last written more than `seconds` ago.
fn older_than(entry: &std::fs::DirEntry, seconds: u64) -> bool {
    let modified = entry.metadata().and_then(|m| m.modified()).ok();
    modified.and_then(|m| m.elapsed().ok()).is_some_and(|age| age.as_secs() > seconds)
}

/// One Arrow IPC frame of `batches`.
pub fn frame(batches: &[RecordBatch]) -> Vec<u8> {
    frames::encode(&batches[0].schema(), batches).expect("encode")
}

pub fn clicks_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("event_id", DataType::Utf8, false),
        Field::new("user_id", DataType::Int64, false),
        Field::new("url", DataType::Utf8, false),
        Field::new("referrer", DataType::Utf8, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), false),
        Field::new("duration_ms", DataType::Int64, true),
        Field::new("country", DataType::Utf8, true),
        Field::new("device", DataType::Utf8, true),
    ]))
}

/// `rows` generated clicks, the same for the same seed.
pub fn clicks(rows: usize, seed: u64) -> RecordBatch {
    let mut rng = StdRng::seed_from_u64(seed);
    let pages = ["/", "/pricing", "/docs", "/docs/quickstart", "/blog/weir", "/signup?plan=pro"];
    let refs = [None, Some("search"), Some("social")];
    let countries = ["DE", "FR", "US", "BR", "JP"];
    let devices = ["desktop", "mobile", "tablet"];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("evt-{seed}-{i}")))),
        Arc::new(Int64Array::from_iter_values((0..rows).map(|_| rng.random_range(1..1000)))),
        Arc::new(StringArray::from_iter_values((0..rows).map(|_| pages[rng.random_range(0..pages.len())]))),
        Arc::new(StringArray::from_iter((0..rows).map(|_| refs[rng.random_range(0..refs.len())]))),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values((0..rows as i64).map(|i| 1_795_000_000_000_000 + i * 1_000))
                .with_timezone("+00:00"),
        ),
        Arc::new(Int64Array::from_iter((0..rows).map(|_| rng.random_bool(0.9).then(|| rng.random_range(0..20_000))))),
        Arc::new(StringArray::from_iter_values((0..rows).map(|_| countries[rng.random_range(0..countries.len())]))),
        Arc::new(StringArray::from_iter_values((0..rows).map(|_| devices[rng.random_range(0..devices.len())]))),
    ];
    RecordBatch::try_new(clicks_schema(), columns).expect("clicks batch")
}

/// A batch of many column types, with nulls, for round-trip tests.
pub fn mixed(rows: usize, seed: u64) -> RecordBatch {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut maybe = |p: f64| rng.random_bool(p);
    let validity: Vec<bool> = (0..rows).map(|_| maybe(0.8)).collect();
    let opt = |i: usize| validity[i];
    let mut tags = ListBuilder::new(StringBuilder::new());
    for i in 0..rows {
        if opt(i) {
            for t in 0..(i % 3) {
                tags.values().append_value(format!("t{t}"));
            }
            tags.append(true);
        } else {
            tags.append(false);
        }
    }
    let geo_fields =
        Fields::from(vec![Field::new("lat", DataType::Float64, true), Field::new("lon", DataType::Float64, true)]);
    let geo = StructArray::new(
        geo_fields.clone(),
        vec![
            Arc::new(Float64Array::from_iter_values((0..rows).map(|i| i as f64 * 0.5))) as ArrayRef,
            Arc::new(Float64Array::from_iter((0..rows).map(|i| opt(i).then_some(-(i as f64))))),
        ],
        None,
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter((0..rows).map(|i| opt(i).then_some(i as i64 * 7 - 3)))),
        Arc::new(Int32Array::from_iter_values((0..rows).map(|i| i as i32))),
        Arc::new(Float64Array::from_iter((0..rows).map(|i| opt(i).then_some(i as f64 / 3.0)))),
        Arc::new(StringArray::from_iter((0..rows).map(|i| opt(i).then(|| format!("row {i} é"))))),
        Arc::new(BooleanArray::from_iter((0..rows).map(|i| opt(i).then_some(i % 2 == 0)))),
        Arc::new(BinaryArray::from_iter((0..rows).map(|i| opt(i).then(|| vec![i as u8; i % 5])))),
        Arc::new(Date32Array::from_iter((0..rows).map(|i| opt(i).then_some(20_000 + i as i32)))),
        Arc::new(
            TimestampMicrosecondArray::from_iter((0..rows).map(|i| opt(i).then_some(i as i64))).with_timezone("+00:00"),
        ),
        Arc::new(tags.finish()),
        Arc::new(geo),
    ];
    let schema = Schema::new(vec![
        Field::new("i64", DataType::Int64, true),
        Field::new("i32", DataType::Int32, false),
        Field::new("f64", DataType::Float64, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("bytes", DataType::Binary, true),
        Field::new("day", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true),
        Field::new("tags", DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), true),
        Field::new("geo", DataType::Struct(geo_fields), false),
    ]);
    RecordBatch::try_new(Arc::new(schema), columns).expect("mixed batch")
}
