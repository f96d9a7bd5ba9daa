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

/// Runs `tests/peers/delta.py` (DuckDB, Polars and deltalake reading a Delta table) with `args`.
pub fn delta_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> serde_json::Value {
    delta_py_with(args, &[])
}

/// The same, with more environment (a bucket's `AWS_*` settings).
pub fn delta_py_with<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, String)]) -> serde_json::Value {
    let out = peer("delta.py", args, env);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("delta.py printed no JSON ({e}):\n{out}"))
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
