//! Independent peers written in Python (`tests/peers/`): Confluent's own
//! serializers and schema-registry client, fastavro, protobuf, pyarrow.

use std::path::PathBuf;
use std::process::Command;

/// `tests/<path>`.
pub fn test_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests").join(path)
}

/// Runs `tests/peers/formats.py` with `args`; its standard output, or a panic with what it said.
pub fn formats_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = Command::new("python3")
        .arg(test_file("peers/formats.py"))
        .args(args)
        .output()
        .expect("running python3 (scripts/setup.sh installs what it needs)");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "formats.py {:?} failed:\n{stdout}\n{stderr}",
        args.iter().map(|a| a.as_ref().to_string_lossy()).collect::<Vec<_>>()
    );
    stdout.into_owned()
}
