//! weir end to end, side by side with librdkafka's raw consume rate and the
//! Python path, on the same broker and the same data, in one run; then
//! latency at a steady rate and the peak memory of a `weir stream` process.
//!
//! `scripts/bench.sh [--quick] [--messages N] [--broker embedded|tansu|both] [--output json]`
//!
//! The embedded broker (librdkafka's mock cluster) keeps at most 5 MB per
//! partition and silently drops older segments, so on it the dataset is
//! capped at what it holds; the full dataset (2 million messages by default)
//! runs on Tansu, a broker in its own process.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod dataset;
mod runs;

use serde::Serialize;

use common::tansu::Tansu;
use weir::embedded_broker::EmbeddedBroker;

/// Messages per batch: the "64k-row batches" the targets speak of.
pub const BATCH: usize = 65_536;
/// The size rollover of the throughput runs.
pub const SIZE_MB: u64 = 64;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Rate {
    pub messages: usize,
    pub seconds: f64,
    pub messages_per_s: f64,
    pub mb_per_s: f64,
}

impl Rate {
    pub fn new(messages: usize, seconds: f64, avg_bytes: f64) -> Self {
        let per_s = messages as f64 / seconds;
        Self { messages, seconds, messages_per_s: per_s, mb_per_s: per_s * avg_bytes / 1e6 }
    }
}

#[derive(Debug, Serialize)]
pub struct Latency {
    pub produce_rate: u64,
    pub messages: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct Memory {
    pub size_rollover_mb: u64,
    pub peak_rss_mb: f64,
    pub target_mb: f64,
    /// Messages in the run's largest committed batch: with the 2 s time
    /// rollover, a large size rollover may not be what closes a batch.
    pub largest_batch: u64,
}

#[derive(Debug, Serialize)]
pub struct Figures {
    pub broker: String,
    pub messages: usize,
    pub avg_message_bytes: f64,
    pub partitions: i32,
    pub raw_consume: Rate,
    pub weir: Rate,
    pub weir_native_identity: Rate,
    pub python: Rate,
    /// Share of weir's end-to-end time spent in the WASM calls: the publish
    /// stage, less the table write that happens inside it.
    pub wasm_share: f64,
    /// CPU time the end-to-end run used (on the embedded broker, the broker's included).
    pub weir_cpu_seconds: f64,
    /// The plugin calls' CPU time over `weir_cpu_seconds`.
    pub wasm_cpu_share: f64,
    pub weir_stage_ms: weir::catalog::Timings,
    pub latency: Latency,
    pub memory: Vec<Memory>,
}

/// A broker the runs talk to, kept alive for as long as it is needed.
pub enum Broker {
    Embedded(EmbeddedBroker),
    Tansu(Tansu),
}

impl Broker {
    pub fn bootstrap(&self) -> String {
        match self {
            Self::Embedded(b) => b.bootstrap_servers().to_string(),
            Self::Tansu(t) => t.address.clone(),
        }
    }

    pub fn create_topic(&self, name: &str, partitions: i32) {
        match self {
            Self::Embedded(b) => b.create_topic(name, partitions).expect("topic"),
            Self::Tansu(t) => t.create_topic(name, partitions as u32),
        }
    }

    /// Settings every client of this broker gets (weir's, the raw consumer's and Python's alike).
    pub fn client_settings(&self) -> Vec<(&'static str, &'static str)> {
        match self {
            Self::Embedded(_) => vec![],
            // Tansu makes a joining member wait about half the session timeout.
            Self::Tansu(_) => vec![("session.timeout.ms", "6000"), ("heartbeat.interval.ms", "500")],
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Embedded(_) => "embedded (librdkafka mock cluster, in process)",
            Self::Tansu(_) => "Tansu (separate process, memory storage)",
        }
    }
}

struct Args {
    messages: usize,
    quick: bool,
    brokers: Vec<String>,
    json: bool,
}

fn args() -> Args {
    let argv: Vec<String> = std::env::args().collect();
    let value = |flag: &str| argv.iter().position(|a| a == flag).and_then(|i| argv.get(i + 1)).cloned();
    let quick = argv.iter().any(|a| a == "--quick");
    let messages = value("--messages").and_then(|n| n.parse().ok()).unwrap_or(if quick { 200_000 } else { 2_000_000 });
    let brokers = match value("--broker").as_deref() {
        Some("embedded") => vec!["embedded".into()],
        Some("tansu") => vec!["tansu".into()],
        _ => vec!["embedded".into(), "tansu".into()],
    };
    Args { messages, quick, brokers, json: value("--output").as_deref() == Some("json") }
}

fn main() {
    let args = args();
    let mut all = Vec::new();
    for name in &args.brokers {
        let broker = match name.as_str() {
            "embedded" => Broker::Embedded(EmbeddedBroker::start(1).expect("embedded broker")),
            _ => Broker::Tansu(Tansu::start()),
        };
        // The mock cluster holds about 5 MB per partition: stay under it.
        let messages = match broker {
            Broker::Embedded(_) => args.messages.min(dataset::EMBEDDED_CAPACITY),
            Broker::Tansu(_) => args.messages,
        };
        let figures = runs::measure(&broker, messages, args.quick);
        if !args.json {
            print_figures(&figures);
        }
        all.push(figures);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&all).unwrap());
    }
}

fn print_figures(f: &Figures) {
    let ratio = |a: &Rate, b: &Rate| a.messages_per_s / b.messages_per_s;
    println!(
        "\n== {}: {} messages of {:.0} B in {} partitions ==",
        f.broker, f.messages, f.avg_message_bytes, f.partitions
    );
    println!("{:<52} {:>12} {:>8} {:>9}", "", "messages/s", "MB/s", "seconds");
    let row = |label: &str, r: &Rate| {
        println!("{label:<52} {:>12.0} {:>8.1} {:>9.2}", r.messages_per_s, r.mb_per_s, r.seconds)
    };
    row("1 librdkafka raw consume (ceiling)", &f.raw_consume);
    row(&format!("2 weir end to end ({BATCH}-msg batches, WASM passthrough)"), &f.weir);
    row("3 weir, native identity instead of the WASM call", &f.weir_native_identity);
    row("4 Python: confluent-kafka + pyarrow from_pylist", &f.python);
    println!(
        "ratios: 2/1 = {:.2} (target ≥ 0.85)   2/4 = {:.1}× (target ≥ 10×)   3/2 = {:.2}",
        ratio(&f.weir, &f.raw_consume),
        ratio(&f.weir, &f.python),
        ratio(&f.weir_native_identity, &f.weir)
    );
    let t = &f.weir_stage_ms;
    println!(
        "weir's stages over the run (ms): decode {:.0}, stage {:.0}, publish {:.0} (WASM {:.0}, writing the table {:.0}), commit {:.0}; WASM = {:.1} % of end-to-end time (target ≤ 10 %)",
        t.decode,
        t.stage,
        t.publish,
        t.publish - t.write,
        t.write,
        t.commit,
        f.wasm_share * 100.0
    );
    println!(
        "the plugin calls used {:.0} ms of CPU, {:.1} % of the {:.1} CPU-seconds of the end-to-end run ({:.2} cores busy{})",
        t.plugin_cpu,
        f.wasm_cpu_share * 100.0,
        f.weir_cpu_seconds,
        f.weir_cpu_seconds / f.weir.seconds,
        if f.broker.starts_with("embedded") { ", the in-process broker's included" } else { "" }
    );
    let l = &f.latency;
    println!(
        "5 latency, produce → committed and visible, at {} msg/s with a 1 s time rollover ({} messages): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        l.produce_rate, l.messages, l.p50_ms, l.p99_ms, l.max_ms
    );
    for m in &f.memory {
        println!(
            "6 peak RSS of `weir stream`, kafka.size_rollover_mb = {:>3}: {:>6.0} MB (target ≤ 1.5 × {} + 100 = {:.0} MB; largest batch {} messages, {:.0} MB; plugin memory limit 4 × the batch)",
            m.size_rollover_mb,
            m.peak_rss_mb,
            m.size_rollover_mb,
            m.target_mb,
            m.largest_batch,
            m.largest_batch as f64 * f.avg_message_bytes / 1e6,
        );
    }
}
