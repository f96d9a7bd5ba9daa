//! Independent peers written in Python (`tests/peers/`): Confluent's own
//! serializers and schema-registry client, fastavro, protobuf, pyarrow; and
//! DuckDB, Polars and deltalake reading Delta tables.

use std::path::PathBuf;
use std::process::Command;

/// `tests/<path>`.
pub fn test_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests").join(path)
}

/// Runs `tests/peers/formats.py` with `args`; its standard output, or a panic with what it said.
pub fn formats_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    peer("formats.py", args, &[])
}

/// Runs `tests/peers/keys.py` (keyed messages with headers; pyarrow reading what weir committed) with `args`.
pub fn keys_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    peer("keys.py", args, &[])
}

/// Runs `tests/peers/subjects.py` (Confluent's AvroSerializer under a subject strategy, or with schema references) with `args`.
pub fn subjects_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    peer("subjects.py", args, &[])
}

/// Runs `tests/peers/glue.py` (the `aws-glue-schema-registry` package's serializer over moto's Glue; pyarrow reading) with `args` and `env`.
pub fn glue_py<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, String)]) -> String {
    peer("glue.py", args, env)
}

/// Values `start..start + count` of topic `clicks`, framed by AWS's Glue
/// serializer through moto's Glue (registry `weir`, straight to moto): `format`
/// avro or json, `schema` v1, v2 or other (see glue.py); the odd ones zlib-compressed.
pub fn glue_produce(moto: &super::s3::S3, bootstrap: &str, format: &str, schema: &str, start: usize, count: usize) {
    let (start, count) = (start.to_string(), count.to_string());
    let args = [
        "produce",
        "--endpoint",
        &moto.direct,
        "--registry",
        "weir",
        "--bootstrap",
        bootstrap,
        "--topic",
        "clicks",
        "--format",
        format,
        "--schema",
        schema,
        "--start",
        &start,
        "--count",
        &count,
        "--compress",
    ];
    glue_py(&args, &moto.direct_env());
}

/// The rows of Parquet files, read with pyarrow, by `id`.
pub fn parquet_rows(files: &[std::path::PathBuf]) -> Vec<serde_json::Value> {
    let mut args = vec!["read".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let out = glue_py(&args, &[]);
    let mut rows: Vec<serde_json::Value> =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("glue.py read printed no JSON ({e}): {out}"));
    rows.sort_by_key(|r| r["id"].as_i64());
    rows
}

/// Runs `tests/peers/delta.py` (DuckDB, Polars and deltalake reading a Delta table) with `args`.
pub fn delta_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> serde_json::Value {
    delta_py_with(args, &[])
}

/// The same, with more environment (a bucket's `AWS_*` settings).
pub fn delta_py_with<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, String)]) -> serde_json::Value {
    let out = peer("delta.py", args, env);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("delta.py printed no JSON ({e}):\n{out}"))
}

/// Runs `tests/peers/iceberg.py` (pyiceberg's SqlCatalog on weir's catalog database, and Polars) with `args`.
pub fn iceberg_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> serde_json::Value {
    iceberg_py_with(args, &[])
}

/// The same, with more environment (a bucket's `AWS_*` settings).
pub fn iceberg_py_with<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, String)]) -> serde_json::Value {
    let out = peer("iceberg.py", args, env);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("iceberg.py printed no JSON ({e}):\n{out}"))
}

/// Runs `tests/peers/console_firefox.mjs` (headless Firefox through puppeteer-core, walking the web console) with `args`.
pub fn console_firefox<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> serde_json::Value {
    let out = Command::new("node")
        .arg(test_file("peers/console_firefox.mjs"))
        .args(args)
        .output()
        .expect("running node (scripts/setup.sh installs what it needs)");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "console_firefox.mjs failed:\n{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("console_firefox.mjs printed no JSON ({e}):\n{stdout}"))
}

/// Runs `tests/peers/console.py` (headless Chromium through Selenium, walking the web console) with `args`.
pub fn console_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> serde_json::Value {
    let out = peer("console.py", args, &[]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("console.py printed no JSON ({e}):\n{out}"))
}

fn peer<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S], env: &[(&str, String)]) -> String {
    let out = Command::new("python3")
        .arg(test_file(&format!("peers/{script}")))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("running python3 (scripts/setup.sh installs what it needs)");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{script} {:?} failed:\n{stdout}\n{stderr}",
        args.iter().map(|a| a.as_ref().to_string_lossy()).collect::<Vec<_>>()
    );
    stdout.into_owned()
}
