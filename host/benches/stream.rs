//! A quick end-to-end figure (the full benchmark is its own work): messages per
//! second through `weir` with the passthrough plugin on the embedded broker,
//! beside librdkafka's raw consume rate on the same data, and the peak memory
//! of a `weir stream` process for two `kafka.size_rollover_mb` values.
//!
//! `cargo bench -p weir --bench stream [-- --messages N]`
//!
//! The embedded broker keeps about 5 MB per partition (librdkafka's mock
//! cluster drops older segments past that), so the default stays under it;
//! the figures count what the broker really holds.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::json;
use weir::catalog::Catalog;
use weir::worker::WorkerOptions;

use common::stream::{CLICKS_SCHEMA, Harness};

fn produce(bootstrap: &str, n: usize) -> u64 {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .unwrap();
    let mut bytes = 0;
    for i in 0..n {
        let value = json!({"event_id": format!("evt-{i:08}"), "user_id": i % 9973, "url": "/docs/quickstart", "referrer": "search",
            "ts": "2026-11-29T10:00:00.000Z", "duration_ms": i % 30000, "country": "DE", "device": "desktop"})
        .to_string();
        let key = (i % 9973).to_string();
        bytes += (value.len() + key.len()) as u64;
        let mut record = BaseRecord::to("clicks").key(&key).payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    bytes
}

fn in_topic(bootstrap: &str) -> usize {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    (0..6)
        .map(|p| {
            consumer
                .fetch_watermarks("clicks", p, Duration::from_secs(10))
                .map(|(lo, hi)| (hi - lo) as usize)
                .unwrap_or(0)
        })
        .sum()
}

fn raw_consume(bootstrap: &str, n: usize) -> Duration {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "raw-consume")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&["clicks"]).unwrap();
    let mut seen = 0;
    let mut started = None;
    while seen < n {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            message.unwrap();
            started.get_or_insert_with(Instant::now);
            seen += 1;
        }
    }
    started.unwrap().elapsed()
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize =
        args.iter().position(|a| a == "--messages").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(120_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let h = Harness::new(6);
    let bootstrap = h.broker.bootstrap_servers().to_string();
    let bytes = produce(&bootstrap, n);
    // Count what the broker holds: the figures are for what is really there.
    let n = in_topic(&bootstrap);
    println!("{n} click events ({:.0} B each) in 6 partitions of the embedded broker\n", bytes as f64 / n as f64);
    // Batches close by count, so the last one does not wait for the clock.
    let per_batch = (n / 5).max(1);
    let timed = per_batch * (n / per_batch);

    let raw = raw_consume(&bootstrap, n);
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!("{:<44} {:>12} {:>9}", "", "messages/s", "MB/s");
    println!(
        "{:<44} {:>12.0} {:>9.1}",
        "librdkafka raw consume (ceiling)",
        rate(raw),
        bytes as f64 / raw.as_secs_f64() / 1e6
    );

    let publisher =
        h.publisher("read-clicks", json!({"kafka.size_rollover_mb": 64, "kafka.messages_rollover": per_batch}), None);
    let started = Instant::now();
    let end_to_end = rt.block_on(async {
        let mut w = h.start(publisher, WorkerOptions::default());
        w.commits_until(timed as u64).await;
        let elapsed = started.elapsed();
        w.stop().await;
        elapsed
    });
    let weir_rate = timed as f64 / end_to_end.as_secs_f64();
    println!(
        "{:<44} {:>12.0} {:>9.1}   ({:.2} of raw; from start, group join included)",
        format!("weir end to end, passthrough, {per_batch}-msg batches"),
        weir_rate,
        weir_rate * (bytes as f64 / n as f64) / 1e6,
        weir_rate / rate(raw)
    );

    let executions = h.catalog.executions("events/read_clicks").unwrap();
    let total = |f: fn(&weir::catalog::Timings) -> f64| executions.iter().map(|e| f(&e.timings_ms)).sum::<f64>();
    println!(
        "  where the time went, over {} batches: decode {:.0} ms, stage {:.0} ms, publish (WASM) {:.0} ms, commit {:.0} ms; wall {:.0} ms",
        executions.len(),
        total(|t| t.decode),
        total(|t| t.stage),
        total(|t| t.publish),
        total(|t| t.commit),
        end_to_end.as_secs_f64() * 1e3
    );

    println!("\npeak RSS of a `weir stream` process reading all {n} messages:");
    for size_mb in [16, 64] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("clicks.json"), CLICKS_SCHEMA).unwrap();
        std::fs::write(
            dir.path().join("p.toml"),
            format!("name = \"read_clicks\"\nflush_interval_mins = 1\noutput_tables = [\"clicks\"]\n[source.kafka]\ntopic = \"clicks\"\ndata_format = \"json\"\nschema = \"clicks.json\"\n[source.kafka.src_cfg]\n\"kafka.size_rollover_mb\" = {size_mb}\n\"kafka.time_rollover_seconds\" = 2\n"),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("stream")
            .arg(dir.path().join("p.toml"))
            .arg("--plugin")
            .arg(common::guest_path("read-clicks"))
            .args(["--bootstrap-servers", &bootstrap, "--group-id", &format!("rss-{size_mb}"), "--data-dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let catalog = Arc::new(Catalog::open(dir.path()).unwrap());
        let mut peak = 0;
        let started = Instant::now();
        loop {
            peak = peak.max(peak_rss_kib(child.id()));
            if let Some(status) = child.try_wait().unwrap() {
                panic!("weir stream exited early: {status}");
            }
            if started.elapsed() > Duration::from_secs(120) {
                panic!("weir stream did not commit {n} rows within 120 s");
            }
            let rows: u64 = catalog.versions("events", "clicks").unwrap().iter().map(|v| v.rows).sum();
            if rows >= n as u64 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        peak = peak.max(peak_rss_kib(child.id()));
        let _ = Command::new("kill").arg(child.id().to_string()).status();
        let _ = child.wait();
        println!(
            "  kafka.size_rollover_mb = {size_mb:>3}: peak RSS {:>6.0} MB  (target: ≤ 1.5 × {size_mb} + 100 = {:.0} MB)",
            peak as f64 / 1024.0,
            1.5 * size_mb as f64 + 100.0
        );
    }
}
