//! weir end to end, side by side with librdkafka's raw consume rate and the
//! Python path, on the same broker and the same data, in one run; then
//! latency at a steady rate and the peak memory of a `weir stream` process.
//!
//! `scripts/bench.sh [--quick] [--messages N] [--broker embedded|tansu|both] [--output json]`
//! `[--only weir|avro|delta] [--table-format iceberg] [--partition-by 'day(_timestamp)' …]`
//!
//! The embedded broker (librdkafka's mock cluster) keeps at most 5 MB per
//! partition and silently drops older segments, so on it the dataset is
//! capped at what it holds; the full dataset (2 million messages by default)
//! runs on Tansu, a broker in its own process.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod dataset;
mod delta_log;
mod peers;
mod runs;

use serde::Serialize;

use common::tansu::Tansu;
use weir::embedded::broker::EmbeddedBroker;

/// Messages per batch: the "64k-row batches" the targets speak of.
pub const BATCH: usize = 65_536;
/// The size rollover of the throughput runs.
pub const SIZE_MB: u64 = 64;
/// The cores weir's end-to-end run is to keep busy: the target each run is held to.
const CORES_TARGET: f64 = 1.6;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Rate {
    pub messages: usize,
    pub seconds: f64,
    pub messages_per_s: f64,
    pub mb_per_s: f64,
    /// CPU time the run's own process used over `seconds` (on the embedded
    /// broker, the broker's included: it runs in that process).
    pub cpu_seconds: f64,
    /// CPU time a broker in its own process used over the same window.
    pub broker_cpu_seconds: Option<f64>,
}

impl Rate {
    pub fn new(messages: usize, seconds: f64, avg_bytes: f64, cpu: Cpu) -> Self {
        let per_s = messages as f64 / seconds;
        Self {
            messages,
            seconds,
            messages_per_s: per_s,
            mb_per_s: per_s * avg_bytes / 1e6,
            cpu_seconds: cpu.own,
            broker_cpu_seconds: cpu.broker,
        }
    }

    /// CPU microseconds per message, the broker's own left out.
    pub fn cpu_us_per_message(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.messages as f64
    }

    /// Cores a broker in its own process kept busy during the run.
    pub fn broker_cores(&self) -> f64 {
        self.broker_cpu_seconds.unwrap_or(0.0) / self.seconds
    }

    /// CPU a broker in its own process used a message during the run.
    pub fn broker_cpu_us_per_message(&self) -> f64 {
        self.broker_cpu_seconds.unwrap_or(0.0) * 1e6 / self.messages as f64
    }
}

/// CPU seconds used over a run: the measuring process's (or the Python
/// path's own) and a separate broker process's.
#[derive(Debug, Clone, Copy)]
pub struct Cpu {
    pub own: f64,
    pub broker: Option<f64>,
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
    /// Run 2 on the same events as Avro framed by a schema registry (topic `Clicks`).
    pub weir_avro: Rate,
    pub avro_message_bytes: f64,
    pub weir_native_identity: Rate,
    pub python: Rate,
    /// The frameworks users would pick instead, on the same topic.
    pub peers: Vec<peers::Peer>,
    /// Share of weir's end-to-end time spent in the WASM calls: the publish
    /// stage, less the table write that happens inside it.
    pub wasm_share: f64,
    /// The plugin calls' CPU time over run 2's `cpu_seconds`.
    pub wasm_cpu_share: f64,
    pub weir_stage_ms: weir::catalog::Timings,
    /// Versions run 2 committed.
    pub weir_commits: usize,
    /// The Delta log alone.
    pub delta: delta_log::DeltaCosts,
    /// Cores this machine has.
    pub cores: f64,
    pub floor: Floor,
    pub latency: Latency,
    pub memory: Vec<Memory>,
}

/// CPU microseconds per message of steps every implementation takes, each
/// measured alone (reading the messages is run 1's figure).
#[derive(Debug, Serialize)]
pub struct Floor {
    pub decode_us_per_message: f64,
    /// Decoding the registry-framed Avro copy instead (arrow-avro).
    pub avro_decode_us_per_message: f64,
    /// Decoding the same events as plain Protobuf (`clicks.proto`).
    pub protobuf_decode_us_per_message: f64,
    pub table_write_us_per_message: f64,
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

    /// CPU time a broker in its own process has used so far; `None` for the
    /// embedded one, whose time counts in this process's.
    pub fn cpu(&self) -> Option<std::time::Duration> {
        let Self::Tansu(t) = self else { return None };
        common::cpu_of(t.pid())
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
    /// `--only weir`: raw consume and weir end to end (JSON) alone, with the
    /// stage timings, the peak RSS at the 64 MB rollover and a short latency
    /// run: the quick loop while working on weir's speed. `--only avro`:
    /// weir end to end on the registry-framed Avro copy alone. `--only delta`:
    /// the Delta log's costs alone (no broker).
    only: Option<String>,
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
    let only = value("--only");
    // The table weir writes: `--table-format iceberg`, `--partition-by 'day(_timestamp)'` (repeated for more).
    let format = value("--table-format").map(|f| weir::tables::TableFormat::parse(&f).unwrap()).unwrap_or_default();
    let partition_by: Vec<String> =
        argv.windows(2).filter(|w| w[0] == "--partition-by").map(|w| w[1].clone()).collect();
    runs::TABLE.set((format, partition_by)).unwrap();
    Args { messages, quick, brokers, json: value("--output").as_deref() == Some("json"), only }
}

fn main() {
    let args = args();
    if args.only.as_deref() == Some("delta") {
        print_delta(&delta_log::measure(if args.quick { 200 } else { 1000 }));
        return;
    }
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
        match args.only.as_deref() {
            Some("weir") => runs::measure_weir(&broker, messages),
            Some("avro") => runs::measure_weir_avro(&broker, messages),
            Some(other) => panic!("--only takes weir, avro or delta, not {other}"),
            None => {}
        }
        if args.only.is_some() {
            continue;
        }
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
    println!("{:<52} {:>12} {:>8} {:>9} {:>12} {:>7}", "", "messages/s", "MB/s", "seconds", "CPU µs/msg", "cores");
    let row = |label: &str, r: &Rate| {
        println!(
            "{label:<52} {:>12.0} {:>8.1} {:>9.2} {:>12.2} {:>7.2}",
            r.messages_per_s,
            r.mb_per_s,
            r.seconds,
            r.cpu_us_per_message(),
            r.cpu_seconds / r.seconds
        )
    };
    row("1 librdkafka raw consume (ceiling)", &f.raw_consume);
    row(&format!("2 weir end to end ({BATCH}-msg batches, WASM passthrough)"), &f.weir);
    row(&format!("2a the same, the events as registry-framed Avro ({:.0} B)", f.avro_message_bytes), &f.weir_avro);
    row("3 weir, native identity instead of the WASM call", &f.weir_native_identity);
    row("4 Python: confluent-kafka + pyarrow from_pylist", &f.python);
    for (i, p) in f.peers.iter().enumerate() {
        row(&format!("4{} {}", (b'a' + i as u8) as char, p.name), &p.rate);
    }
    println!(
        "ratios: 2/1 = {:.2} (target ≥ 0.6; 0.85 once there are cores to spare)   2/4 = {:.1}× (target ≥ 5×)   3/2 = {:.2}   1/4 = {:.1}×",
        ratio(&f.weir, &f.raw_consume),
        ratio(&f.weir, &f.python),
        ratio(&f.weir_native_identity, &f.weir),
        ratio(&f.raw_consume, &f.python)
    );
    for p in &f.peers {
        println!(
            "weir / {}: {:.1}× the messages/s (target ≥ 5×), {:.1}× less CPU per message; its peak RSS {:.0} MB; {}",
            p.name,
            ratio(&f.weir, &p.rate),
            p.rate.cpu_us_per_message() / f.weir.cpu_us_per_message(),
            p.peak_rss_mb,
            p.guarantee
        );
    }
    println!(
        "Avro / JSON end to end: 2a/2 = {:.2} (target ≥ 1.3); decoding alone, µs per message: Avro {:.2}, Protobuf {:.2}, JSON {:.2}",
        ratio(&f.weir_avro, &f.weir),
        f.floor.avro_decode_us_per_message,
        f.floor.protobuf_decode_us_per_message,
        f.floor.decode_us_per_message
    );
    if f.weir.broker_cpu_seconds.is_some() {
        println!(
            "the broker's own process kept {:.2} cores busy during run 1 and {:.2} during run 2 (not in the figures above)",
            f.raw_consume.broker_cores(),
            f.weir.broker_cores()
        );
        // The broker's CPU grows with the messages it serves: the cores it leaves
        // are not fixed, and the more cheaply weir handles a message, the fewer it can fill.
        let most = |run: &Rate| {
            let (c, b) = (run.cpu_us_per_message(), run.broker_cpu_us_per_message());
            (b, f.cores * c / (c + b))
        };
        let ((b, at_most), (b_avro, at_most_avro)) = (most(&f.weir), most(&f.weir_avro));
        // Keeping `CORES_TARGET` busy takes c ≥ CORES_TARGET × b / (cores − CORES_TARGET).
        let needs = match f.cores > CORES_TARGET {
            true => format!("{:.2} µs a message or more", CORES_TARGET * b / (f.cores - CORES_TARGET)),
            false => "more cores than there are".into(),
        };
        println!(
            "the broker used {b:.2} µs of CPU a message it served during run 2 ({b_avro:.2} in run 2a): sharing {:.0} cores with it, weir at {:.2} µs a message keeps at most {at_most:.2} busy (run 2a: {at_most_avro:.2}); {CORES_TARGET} would take {needs}",
            f.cores,
            f.weir.cpu_us_per_message()
        );
    }
    // What the CPU-rate targets ask of each message on this machine.
    let free = f.cores - f.weir.broker_cores();
    let budget = |rate: f64| free / rate * 1e6;
    println!(
        "on {:.0} cores ({:.2} left by the broker; run 2 kept {:.2} busy, target ≥ {CORES_TARGET}): 2/1 ≥ 0.6 means {:.0} msg/s, at most {:.2} µs of CPU per message; 2/4 ≥ 5× means {:.0} msg/s, at most {:.2} µs; run 2 used {:.2} µs",
        f.cores,
        free,
        f.weir.cpu_seconds / f.weir.seconds,
        0.6 * f.raw_consume.messages_per_s,
        budget(0.6 * f.raw_consume.messages_per_s),
        5.0 * f.python.messages_per_s,
        budget(5.0 * f.python.messages_per_s),
        f.weir.cpu_us_per_message()
    );
    let floor = f.raw_consume.cpu_us_per_message() + f.floor.decode_us_per_message + f.floor.table_write_us_per_message;
    println!(
        "steps no implementation skips, each measured alone: reading {:.2} (run 1) + decoding JSON to Arrow {:.2} + writing the table's parquet {:.2} = {:.2} µs of CPU per message",
        f.raw_consume.cpu_us_per_message(),
        f.floor.decode_us_per_message,
        f.floor.table_write_us_per_message,
        floor
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
        "the Delta log: {:.0} ms over run 2's {} commits ({:.1} ms each), {:.2} % of end-to-end time (target ≤ 3 %)",
        t.log,
        f.weir_commits,
        t.log / f.weir_commits.max(1) as f64,
        t.log / 1e3 / f.weir.seconds * 100.0,
    );
    print_delta(&f.delta);
    println!(
        "the plugin calls used {:.0} ms of CPU, {:.1} % of the {:.1} CPU-seconds of the end-to-end run{}",
        t.plugin_cpu,
        f.wasm_cpu_share * 100.0,
        f.weir.cpu_seconds,
        if f.broker.starts_with("embedded") { " (the in-process broker's included)" } else { "" }
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

fn print_delta(d: &delta_log::DeltaCosts) {
    let checkpoints: Vec<String> =
        d.checkpoints_ms.iter().map(|(v, ms)| format!("{ms:.1} ms at version {v}")).collect();
    println!(
        "the Delta log alone: the check before a batch commits {:.2} ms, a commit {:.2} ms, a checkpoint {}",
        d.ready_ms,
        d.commit_ms,
        checkpoints.join(", ")
    );
    let after: Vec<String> = d.after_foreign_ms.iter().map(|(n, ms)| format!("{ms:.2} ms after {n}")).collect();
    println!("a Delta commit after other writers' commits, which it reads first: {}", after.join(", "));
    let (plain, iceberg) = (d.catalog_commit_ms, d.iceberg_commit_ms);
    println!(
        "the catalog's commit of a version: {:.2} ms (mean {:.2}); with Iceberg metadata {:.2} ms (mean {:.2}), +{:.2} ms a commit",
        plain.0,
        plain.1,
        iceberg.0,
        iceberg.1,
        iceberg.1 - plain.1
    );
}
