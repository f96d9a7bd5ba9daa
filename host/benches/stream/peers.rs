//! The frameworks users would pick instead of weir, each run as its users
//! write it (`peers/*.py`) on the same broker and the same topic, from the
//! beginning in a fresh group, stopping on the message count (Tansu's
//! watermarks are wrong). They live in the benchmark's own virtualenv,
//! pinned (`scripts/bench-peers.txt`, installed by `scripts/bench.sh`), apart
//! from the tests' packages.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use super::{BATCH, Cpu, Rate, SIZE_MB};

struct Spec {
    name: &'static str,
    script: &'static str,
    /// What a crash or restart does to its output.
    guarantee: &'static str,
}

const PEERS: [Spec; 2] = [
    Spec {
        name: "pathway 0.33 (kafka.read + subscribe, parquet)",
        script: "pathway_path.py",
        guarantee: "at least once at best: without its licensed persistence a restart reads from the reset position again",
    },
    Spec {
        name: "quixstreams 3.28 (LocalFileSink + ParquetFormat)",
        script: "quixstreams_path.py",
        guarantee: "at least once: the sink writes, then the offsets are committed",
    },
];

#[derive(Debug, Serialize)]
pub struct Peer {
    pub name: String,
    pub guarantee: String,
    pub rate: Rate,
    pub peak_rss_mb: f64,
}

/// What a Python run answered (see `peers/common.py`).
pub struct Answer {
    pub seconds: f64,
    pub cpu: Cpu,
    pub peak_rss_mb: Option<f64>,
}

/// Runs `script` on `timed` messages of `clicks` in group `group`, with the
/// same consumer settings as weir's.
pub fn run_script(
    python: &Path,
    script: &Path,
    bootstrap: &str,
    settings: &[(&str, &str)],
    group: &str,
    timed: usize,
) -> Answer {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(script)
        .args([bootstrap, "clicks", group, &timed.to_string(), &BATCH.to_string(), &SIZE_MB.to_string()])
        .arg(dir.path())
        .args(weir::sources::kafka::CONSUMER_DEFAULTS.iter().chain(settings).map(|(k, v)| format!("{k}={v}")))
        .env("PYTHONWARNINGS", "ignore")
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line =
        text.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("{}: no answer", script.display()));
    let answer: serde_json::Value = serde_json::from_str(line).expect("the peer's JSON");
    assert_eq!(answer["messages"], timed, "{}", script.display());
    Answer {
        seconds: answer["seconds"].as_f64().unwrap(),
        cpu: Cpu { own: answer["cpu_seconds"].as_f64().unwrap(), broker: None },
        peak_rss_mb: answer["peak_rss_mb"].as_f64(),
    }
}

/// The benchmark's virtualenv's interpreter, if it is there.
fn python() -> Option<PathBuf> {
    let path = std::env::var_os("WEIR_BENCH_PEERS_PYTHON").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/weir/bench-peers/bin/python"))
    })?;
    path.exists().then_some(path)
}

/// Every peer on the dataset; none when their virtualenv is missing (said once).
pub fn run_all(bootstrap: &str, settings: &[(&str, &str)], timed: usize, avg_bytes: f64, label: &str) -> Vec<Peer> {
    let Some(python) = python() else {
        eprintln!("[{label}] no peers: their virtualenv is missing (scripts/bench.sh installs it)");
        return Vec::new();
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/stream/peers");
    PEERS
        .iter()
        .map(|spec| {
            eprintln!("[{label}] {} ...", spec.name);
            let group = spec.script.trim_end_matches(".py");
            let answer = run_script(&python, &dir.join(spec.script), bootstrap, settings, group, timed);
            Peer {
                name: spec.name.into(),
                guarantee: spec.guarantee.into(),
                rate: Rate::new(timed, answer.seconds, avg_bytes, answer.cpu),
                peak_rss_mb: answer.peak_rss_mb.unwrap_or(f64::NAN),
            }
        })
        .collect()
}
