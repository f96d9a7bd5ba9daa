//! `weir run-plugin` as a user runs it: a real process, real files, and the
//! parquet it writes read back by an independent reader (pyarrow).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use weir::plugin::frames::Frame;

use common::{clicks, guest_path, shared_cache};

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("WEIR_CACHE_DIR", shared_cache())
        .output()
        .expect("running weir")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn sample(name: &str) -> String {
    repo().join("guest-examples/data").join(name).display().to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `weir run-plugin PLUGIN -i clicks.jsonl --output-dir OUT EXTRA...`: the sample clicks as the one frame.
fn run_on_sample(plugin: &Path, out_dir: &Path, extra: &[&str]) -> Output {
    let (plugin, input, out_dir) =
        (plugin.display().to_string(), sample("clicks.jsonl"), out_dir.display().to_string());
    let mut args = vec!["run-plugin", &plugin, "-i", &input, "--output-dir", &out_dir];
    args.extend_from_slice(extra);
    weir(&args)
}

/// Writes a clicks table as parquet and as an Arrow IPC file, for inputs.
fn write_inputs(dir: &Path) -> (String, String) {
    let batch = clicks(100, 9);
    let frame = Frame { schema: batch.schema(), batches: vec![batch.clone()] };
    let parquet = dir.join("more.parquet");
    let file = std::fs::File::create(&parquet).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, frame.schema.clone(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let arrow = dir.join("more.arrow");
    let mut writer =
        arrow::ipc::writer::FileWriter::try_new(std::fs::File::create(&arrow).unwrap(), &frame.schema).unwrap();
    writer.write(&batch).unwrap();
    writer.finish().unwrap();
    (parquet.display().to_string(), arrow.display().to_string())
}

#[test]
fn read_clicks_on_three_formats_writes_parquet_that_pyarrow_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (parquet, arrow) = write_inputs(dir.path());
    let out_dir = dir.path().join("out");
    let plugin = guest_path("read-clicks").display().to_string();
    let jsonl = sample("clicks.jsonl");
    let schema = sample("clicks.json");
    let out = weir(&[
        "run-plugin",
        &plugin,
        "--input",
        &jsonl,
        "--input",
        &parquet,
        "--input",
        &arrow,
        "--schema",
        &schema,
        "--output-dir",
        out_dir.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "stdout: {}\nstderr: {}", text(&out.stdout), text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["inputs"].as_array().unwrap().len(), 3);
    let outputs = report["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0]["name"], "clicks");
    assert_eq!(outputs[0]["rows"], 440);
    assert_eq!(outputs[0]["columns"], 8);
    assert!(report["plugin"]["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(report["plugin"]["contract"], "0.2.1");

    // An independent reader: pyarrow must read what we wrote, with the same rows.
    let script = r#"
import sys, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
ids = t.column("event_id").to_pylist()
print(t.num_rows, t.num_columns, ids[0], ids[240], str(t.schema.field("ts").type), t.column("user_id").null_count)
"#;
    let parquet_out = out_dir.join("clicks.parquet");
    let py = Command::new("python3").arg("-c").arg(script).arg(&parquet_out).output().expect("python3");
    assert!(
        py.status.success(),
        "pyarrow could not read {}: {} (scripts/setup.sh installs pyarrow)",
        parquet_out.display(),
        text(&py.stderr)
    );
    assert_eq!(text(&py.stdout).trim(), "440 8 evt-00000 evt-9-0 timestamp[us, tz=+00:00] 0");
}

#[test]
fn table_output_shows_outputs_and_the_plugin_log() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = guest_path("clicks-enrich");
    let out = run_on_sample(&plugin, dir.path(), &["--schema", &sample("clicks.json")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("output:"), "{stdout}");
    let row = stdout.lines().find(|l| l.trim_start().starts_with("clicks ")).expect("an output row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[2], "9", "columns: {row}");
    assert!(stdout.contains("plugin log:"), "{stdout}");
    assert!(stdout.contains(&format!("info  log    kept {} of 240 clicks", cells[1])), "{stdout}");
    assert!(dir.path().join("clicks.parquet").exists());
}

#[test]
fn a_failing_plugin_exits_non_zero_with_the_error_and_no_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = guest_path("hostile-panic");
    let out = run_on_sample(&plugin, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: the plugin panicked: cannot handle a batch of 1 slots (at "), "{stderr}");
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(!dir.path().join("clicks.parquet").exists());

    let json = run_on_sample(&plugin, dir.path(), &["--output", "json"]);
    assert_eq!(json.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(report["error"].as_str().unwrap().starts_with("the plugin panicked: "), "{report}");
    assert!(report["log"]["lines"].as_array().unwrap().iter().any(|l| l["source"] == "stderr"));
}

#[test]
fn limits_are_flags() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = guest_path("hostile-infinite-loop");
    let out = run_on_sample(&plugin, dir.path(), &["--deadline", "150ms"]);
    assert_eq!(out.status.code(), Some(1));
    // One line: what stopped it and how to give it more, no frames of wasm.
    let said = text(&out.stderr);
    let error = said.lines().find(|l| l.starts_with("error: ")).unwrap_or_default();
    assert!(
        error.starts_with("error: the plugin exceeded its 150 ms CPU deadline and was stopped")
            && error.contains("`--deadline`"),
        "{said}"
    );
    assert!(!said.contains("wasm backtrace") && !said.contains("<wasm function"), "{said}");

    let plugin = guest_path("hostile-memory-bomb");
    let out = run_on_sample(&plugin, dir.path(), &["--memory-limit", "32MiB"]);
    assert!(
        text(&out.stderr).contains("error: the plugin exceeded its 32 MiB memory limit and was stopped"),
        "{}",
        text(&out.stderr)
    );
}

/// An Avro object container file written by fastavro (an independent writer) is a frame too.
#[test]
fn an_avro_container_file_written_by_fastavro_is_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let avro = dir.path().join("clicks.avro");
    let script = r#"
import sys, json, datetime, fastavro
schema = fastavro.parse_schema(json.load(open(sys.argv[1])))
base = datetime.datetime(2026, 11, 29, tzinfo=datetime.timezone.utc)
rows = [{"event_id": f"evt-{i}", "user_id": i, "url": "/docs", "referrer": None if i % 2 else "search",
         "ts": base + datetime.timedelta(seconds=i), "duration_ms": i * 10, "country": "DE", "device": None}
        for i in range(300)]
with open(sys.argv[2], "wb") as f:
    fastavro.writer(f, schema, rows, codec="deflate")
"#;
    let py = Command::new("python3").arg("-c").arg(script).arg(sample("clicks.avsc")).arg(&avro).output().unwrap();
    assert!(py.status.success(), "fastavro: {}", text(&py.stderr));
    let out_dir = dir.path().join("out");
    let plugin = guest_path("read-clicks").display().to_string();
    let out = weir(&[
        "run-plugin",
        &plugin,
        "-i",
        avro.to_str().unwrap(),
        "--output-dir",
        out_dir.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "stdout: {}\nstderr: {}", text(&out.stdout), text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["outputs"][0]["rows"], 300);
    let frame = weir::input::read(&out_dir.join("clicks.parquet"), None).unwrap();
    let schema = frame.schema.clone();
    assert_eq!(schema.field_with_name("ts").unwrap().data_type().to_string(), "Timestamp(µs, \"+00:00\")");
    assert!(schema.field_with_name("referrer").unwrap().is_nullable());
}

#[test]
fn inputs_that_are_not_what_their_extension_says_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = guest_path("read-clicks").display().to_string();
    let out_dir = dir.path().join("out");
    let cases = [
        ("fake.parquet", "{\"a\": 1}\n", "not a readable parquet file"),
        ("fake.arrow", "this is text", "not a readable Arrow IPC file"),
        ("fake.jsonl", "{\"a\": 1}\n{oops\n", "not a readable newline-delimited JSON file"),
        ("fake.avro", "Obj but not really", "not a readable Avro object container file"),
        (
            "fake.csv",
            "a,b\n1,2\n",
            "unknown input format; use a .parquet, .arrow (Arrow IPC), .avro (an Avro object container file) or .jsonl/.ndjson",
        ),
    ];
    for (name, content, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let out =
            weir(&["run-plugin", &plugin, "-i", path.to_str().unwrap(), "--output-dir", out_dir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: ") && stderr.contains(expected), "{name}: {stderr}");
        assert!(stderr.contains(name), "the error names the file: {stderr}");
    }
}

#[test]
fn a_file_that_is_not_a_plugin_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("plugin.wasm");
    std::fs::write(&fake, b"not wasm at all").unwrap();
    let out = run_on_sample(&fake, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("loading plugin") && stderr.contains("is not a WebAssembly component"), "{stderr}");
}

#[test]
fn the_weir_binary_allocates_with_jemalloc_and_weirs_settings() {
    // jemalloc prints its options at exit when asked; every setting weir gives it must show.
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("--version")
        .env("MALLOC_CONF", "stats_print:true")
        .output()
        .expect("running weir");
    assert!(out.status.success());
    let stats = text(&out.stderr);
    for setting in weir::memory::CONFIG.to_str().unwrap().split(',') {
        let (key, value) = setting.split_once(':').unwrap();
        assert!(stats.contains(&format!("opt.{key}: {value}")), "jemalloc does not run with {setting}:\n{stats}");
    }
}

/// `weir plugin new NAME --language L`, `weir plugin build`, then the component on its own sample.
fn new_build_run(language: &str, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join(name);
    let project_arg = project.display().to_string();
    let new = weir(&["plugin", "new", name, "--language", language, "--dir", &project_arg]);
    assert!(new.status.success(), "{}", text(&new.stderr));
    assert!(project.join("README.md").exists() && project.join("sample.jsonl").exists());
    // Built in the guests' target directory, so the SDK's crates are not compiled again.
    let guests_target = common::guests_dir().ancestors().nth(2).unwrap().to_path_buf();
    let built = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["plugin", "build", &project_arg])
        .env("CARGO_TARGET_DIR", &guests_target)
        .output()
        .unwrap();
    let said = text(&built.stdout);
    assert!(built.status.success(), "{said}{}", text(&built.stderr));
    assert!(said.starts_with("built ") && said.trim_end().ends_with("MiB, weir:publisher@0.2.1)"), "{said}");
    let component = PathBuf::from(said["built ".len()..].split(" (").next().unwrap());
    let out = dir.path().join("out");
    // It writes the table its declaration names, so without one it says how to give it.
    let ran = run_on_sample(&component, &out, &[]);
    assert!(!ran.status.success());
    assert!(text(&ran.stderr).contains("this run declares no output tables"), "{language}: {}", text(&ran.stderr));
    // The scaffolded declaration runs it as the server would: the declared schema, provenance columns.
    let declaration = project.join("publisher.toml").display().to_string();
    let ran = run_on_sample(&component, &out, &["--declaration", &declaration]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let frame = weir::input::read(&out.join("clicks.parquet"), None).unwrap();
    assert_eq!(frame.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 240, "{language}");
    assert!(frame.schema.field_with_name("_offset").is_ok(), "{language}: {:?}", frame.schema);
}

#[test]
fn a_new_python_publisher_builds_and_runs() {
    new_build_run("python", "hello_py");
}

#[test]
fn a_new_typescript_publisher_builds_and_runs() {
    new_build_run("typescript", "hello_ts");
}

#[test]
fn a_new_javascript_publisher_builds_and_runs() {
    new_build_run("javascript", "hello_js");
}

/// A TypeScript publisher over weir's columnar kernels ('weir/frame'):
/// `weir plugin build` composes them in, and the component runs on the
/// project's sample.
#[test]
fn a_typescript_publisher_over_the_kernels_builds_with_them_composed_in_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("kernels_ts");
    let project_arg = project.display().to_string();
    assert!(weir(&["plugin", "new", "kernels_ts", "--language", "typescript", "--dir", &project_arg]).status.success());
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-examples/js/kernels-filter/app.ts");
    std::fs::copy(example, project.join("app.ts")).unwrap();
    let built = weir(&["plugin", "build", &project_arg]);
    let said = text(&built.stdout);
    assert!(built.status.success(), "{said}{}", text(&built.stderr));
    assert!(said.trim_end().ends_with("MiB, weir:publisher@0.2.1)"), "composed, it imports no kernels: {said}");
    let component = PathBuf::from(said["built ".len()..].split(" (").next().unwrap());
    let (out, declaration) = (dir.path().join("out"), project.join("publisher.toml").display().to_string());
    let ran = run_on_sample(&component, &out, &["--declaration", &declaration]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let frame = weir::input::read(&out.join("clicks.parquet"), None).unwrap();
    let sample = std::fs::read_to_string(project.join("sample.jsonl")).unwrap();
    let long = sample
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["duration_ms"].as_i64())
        .filter(|&ms| ms >= 100)
        .count();
    assert!(long > 0 && long < 240);
    assert_eq!(frame.batches.iter().map(|b| b.num_rows()).sum::<usize>(), long);
    let columns: Vec<&str> = frame.schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(columns, ["event_id", "url", "duration_ms", "duration_s"]);
}

/// A new project in `language` whose code is changed to do each of `cases`
/// (a statement, put after `anchor`) and then fail with the error given.
fn raises(language: &str, app: &str, anchor: &str, cases: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("raising");
    let project_arg = project.display().to_string();
    assert!(weir(&["plugin", "new", "raising", "--language", language, "--dir", &project_arg]).status.success());
    let code = std::fs::read_to_string(project.join(app)).unwrap();
    for (statement, error) in cases {
        let indent = &anchor[..anchor.len() - anchor.trim_start().len()];
        let raising = code.replacen(anchor, &format!("{anchor}\n{indent}{statement}"), 1);
        assert_ne!(raising, code);
        std::fs::write(project.join(app), raising).unwrap();
        let built = weir(&["plugin", "build", &project_arg]);
        assert!(built.status.success(), "{}", text(&built.stderr));
        let ran = run_on_sample(&project.join("raising.wasm"), &dir.path().join("out"), &[]);
        assert!(!ran.status.success());
        assert!(text(&ran.stderr).contains(error), "{language}: {}", text(&ran.stderr));
    }
}

#[test]
fn a_python_publishers_exceptions_are_its_errors() {
    raises(
        "python",
        "app.py",
        "    rows = 0",
        &[
            ("raise ValueError('no column price')", "the plugin rejected its input: no column price"),
            // Where, in the author's file: not the SDK's frames, not componentize-py's paths.
            ("{}['price']", "the plugin failed: KeyError: 'price' (at app.py:21, in publish)"),
            // A column the input lacks: invalid input, naming those it has, as in TypeScript.
            (
                "[f.select('price') for f in frames(slots[0])]",
                "the plugin rejected its input: the frame has no column `price` (its columns: event_id, user_id",
            ),
        ],
    );
}

#[test]
fn a_javascript_publishers_exceptions_are_its_errors() {
    raises(
        "javascript",
        "app.js",
        "  let rows = 0;",
        &[
            ("throw new InvalidInput('no column price');", "the plugin rejected its input: no column price"),
            ("null.price;", "the plugin failed: TypeError: can't access property \"price\" of null (at app.js:18)"),
            (
                "for (const f of frames(slots[0])) f.select('price');",
                "the plugin rejected its input: the frame has no column `price` (its columns: event_id, user_id",
            ),
        ],
    );
}

#[test]
fn a_typescript_publishers_runtime_errors_point_at_its_own_lines() {
    // Not the bundle's (`publish@app.js:11389:42`): app.ts's, through the bundle's source map.
    raises(
        "typescript",
        "app.ts",
        "  let rows = 0;",
        &[(
            "(null as any).price;",
            "the plugin failed: TypeError: can't access property \"price\" of null (at app.ts:18)",
        )],
    );
}

#[test]
fn a_python_build_failure_says_what_is_wrong_in_the_authors_file() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("wrong");
    let project_arg = project.display().to_string();
    assert!(weir(&["plugin", "new", "wrong", "--language", "python", "--dir", &project_arg]).status.success());
    let app = project.join("app.py");
    let code = std::fs::read_to_string(&app).unwrap();
    for (changed, says, not) in [
        // No decorator: what is missing, not componentize-py's AttributeError.
        (
            code.replace("@weir.publisher\n", ""),
            "app.py defines no publisher: put `@weir.publisher` on the function",
            "WitWorld",
        ),
        // A syntax error: the file, line and message, not componentize-py's traceback.
        (format!("{code}\ndef broken(:\n    pass\n"), "  File \"app.py\", line 29\n    def broken(:\n", "/0/"),
    ] {
        assert_ne!(changed, code);
        std::fs::write(&app, &changed).unwrap();
        let built = weir(&["plugin", "build", &project_arg]);
        let said = text(&built.stderr);
        assert!(!built.status.success() && said.contains(says), "{said}");
        assert!(!said.contains(not) && !said.contains("Stack backtrace") && !said.contains("site-packages"), "{said}");
    }
}

#[test]
fn a_new_rust_publisher_builds_outside_the_repository_and_runs() {
    new_build_run("rust", "hello_rs");
}

#[test]
fn plugin_new_and_build_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let empty = weir(&["plugin", "build", &path]);
    assert!(!empty.status.success());
    assert!(
        text(&empty.stderr).contains("holds no publisher project (a Cargo.toml, a package.json or an app.py)"),
        "{empty:?}"
    );

    let bad = weir(&["plugin", "new", "Hello World", "--language", "rust", "--dir", &path]);
    assert!(text(&bad.stderr).contains("is not a valid plugin name"), "{bad:?}");
    std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
    let taken = weir(&["plugin", "new", "hello", "--language", "rust", "--dir", &path]);
    assert!(text(&taken.stderr).contains("already exists and is not empty"), "{taken:?}");

    // A missing toolchain: the error says what to install.
    for (language, install) in
        [("python", "pip install componentize-py==0.25.0"), ("javascript", "install Node.js 20 or later, with npm")]
    {
        let project = dir.path().join(language);
        let project_arg = project.display().to_string();
        assert!(weir(&["plugin", "new", language, "--language", language, "--dir", &project_arg]).status.success());
        let no_tool = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["plugin", "build", &project_arg])
            .env("PATH", "")
            .output()
            .unwrap();
        assert!(text(&no_tool.stderr).contains(install), "{language}: {no_tool:?}");
    }
}

#[test]
fn a_failed_build_removes_the_component_it_would_have_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("stale");
    let project_arg = project.display().to_string();
    assert!(weir(&["plugin", "new", "stale", "--language", "python", "--dir", &project_arg]).status.success());
    assert!(weir(&["plugin", "build", &project_arg]).status.success());
    let component = project.join("stale.wasm");
    assert!(component.exists());
    let code = std::fs::read_to_string(project.join("app.py")).unwrap();
    std::fs::write(project.join("app.py"), format!("{code}\ndef broken(:\n")).unwrap();
    let built = weir(&["plugin", "build", &project_arg]);
    assert!(!built.status.success());
    let said = text(&built.stderr);
    assert!(said.contains("is removed so that nothing runs stale code"), "{said}");
    assert!(!component.exists(), "the old component is gone: run-plugin cannot run stale code");
}

#[test]
fn local_plugin_commands_list_no_server_flags_and_remote_ones_do() {
    for local in ["new", "build"] {
        let help = text(&weir(&["plugin", local, "--help"]).stdout);
        assert!(!help.contains("--server") && !help.contains("--token"), "plugin {local}:\n{help}");
    }
    let help = text(&weir(&["plugin", "push", "--help"]).stdout);
    assert!(help.contains("--server") && help.contains("--output"), "{help}");
}

/// A declaration of `topic` in `dir`, with the clicks schema beside it.
fn declare(dir: &Path, topic: &str) -> String {
    std::fs::copy(sample("clicks.json"), dir.join("clicks.json")).unwrap();
    let text = format!(
        "name = \"read_clicks\"\nflush_interval_mins = 1\noutput_tables = [\"{topic}\"]\n\n[source.kafka]\n\
         topic = \"{topic}\"\ndata_format = \"json\"\nschema = \"clicks.json\"\n"
    );
    let path = dir.join(format!("{topic}.toml"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn run_plugin_with_a_declaration_decodes_and_checks_as_the_server_and_expect_holds_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = common::guest_path("read-clicks");
    let declaration = declare(dir.path(), "clicks");
    // The sample and a line that does not decode as declared.
    let input = dir.path().join("input.jsonl");
    let mut lines = std::fs::read_to_string(sample("clicks.jsonl")).unwrap();
    lines.push_str(
        "{\"event_id\": \"bad\", \"user_id\": \"not a number\", \"url\": \"/\", \"ts\": \"2026-11-29T10:00:00Z\"}\n",
    );
    std::fs::write(&input, lines).unwrap();
    let run = |extra: &[&str]| {
        let (plugin, input, out) = (plugin.display().to_string(), input.display().to_string(), dir.path().join("out"));
        let out = out.display().to_string();
        let mut args = vec!["run-plugin", &plugin, "-i", &input, "--output-dir", &out, "--declaration", &declaration];
        args.extend_from_slice(extra);
        weir(&args)
    };
    let ran = run(&[]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let said = text(&ran.stdout);
    assert!(said.contains("dead letters") && said.contains("input.jsonl:241:") && said.contains("user_id"), "{said}");

    // --expect: the rows on the columns it names, in order.
    let expected = dir.path().join("expected.jsonl");
    let rows: Vec<String> =
        (0..240).map(|i| format!("{{\"event_id\": \"evt-{i:05}\", \"_offset\": {i}, \"_partition\": 0}}")).collect();
    std::fs::write(&expected, rows.join("\n")).unwrap();
    let held = run(&["--expect", expected.to_str().unwrap()]);
    assert!(held.status.success(), "{}{}", text(&held.stdout), text(&held.stderr));
    std::fs::write(&expected, rows.join("\n").replace("evt-00007", "evt-7")).unwrap();
    let differs = run(&["--expect", expected.to_str().unwrap()]);
    assert!(!differs.status.success());
    let said = text(&differs.stderr);
    assert!(said.contains("at row 8: column `event_id` is \"evt-00007\", expected \"evt-7\""), "{said}");

    // A topic whose table the plugin does not write: refused as the server refuses it.
    let views = declare(dir.path(), "views");
    let (p, i, o) =
        (plugin.display().to_string(), input.display().to_string(), dir.path().join("o").display().to_string());
    let refused = weir(&["run-plugin", &p, "-i", &i, "--output-dir", &o, "--declaration", &views]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("output table `clicks` is not one this publisher declares (declared: views)")
    );
}
