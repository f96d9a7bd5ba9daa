//! Density: what publishers cost one `weir serve` node while they are idle.
//! For each count (default 10 and 100; `-- --publishers 10,100,1000`), a fresh
//! node registers that many publishers in tenants of 10 (a tenant's collection
//! and its connection, which its publishers share: one consumer on the node),
//! each reading its own 1-partition topic on the embedded broker (the
//! passthrough plugin, JSON values). Printed: registration time; then, idle,
//! RSS and threads above an empty node and per publisher, the threads by what
//! owns them, and the CPU the node uses doing nothing; then the time from
//! sending one message to each topic (1 s time rollover) until every
//! publisher has committed it; then the time from starting the node again on
//! its data until every publisher holds its partition again. Beside it,
//! librdkafka's share: as many idle consumers with the workers' settings in
//! one process, one per publisher as before the consumers were shared.
//!
//! `cargo bench -p weir --bench density [-- --publishers 10,100]`

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::many;
use common::serve::Server;

/// How long the node is watched doing nothing.
const IDLE: Duration = Duration::from_secs(20);
const TENANT: usize = 10;

/// A process as `/proc` shows it at one moment.
struct Sample {
    rss_mb: f64,
    threads: usize,
    /// Thread names without their numbers (`rdk:broker12` → `rdk:broker`), counted.
    owners: BTreeMap<String, usize>,
}

fn sample(pid: u32) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> f64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let mut owners = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else { continue };
        let name: String = name.trim().trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '#').into();
        *owners.entry(name).or_default() += 1;
    }
    Sample { rss_mb: field("VmRSS:") / 1024.0, threads: field("Threads:") as usize, owners }
}

/// The share of a core `pid` used over `IDLE`, and what it looked like at the end.
fn idle(pid: u32) -> (f64, Sample) {
    let before = common::cpu_of(pid).unwrap();
    std::thread::sleep(IDLE);
    let used = common::cpu_of(pid).unwrap() - before;
    (used.as_secs_f64() / IDLE.as_secs_f64(), sample(pid))
}

struct Run {
    publishers: usize,
    register_s: f64,
    idle_cores: f64,
    sample: Sample,
    first_commit_s: f64,
    /// From starting the node again on its data until every publisher holds its partition again.
    restart_s: f64,
}

/// Publishers whose partitions `server` holds now, as its heartbeat says (every 2 s).
fn holding(server: &Server) -> usize {
    let port = server.url.rsplit(':').next().unwrap().trim_end_matches('/');
    let metrics = server.text("/metrics", common::serve::ADMIN);
    many::series(&metrics, "weir_cluster_partitions", &[])
        .iter()
        .filter(|(labels, held)| labels.contains(&format!(":{port}\"")) && *held > 0.0)
        .count()
}

fn versions(server: &Server, token: &str, table: &str) -> usize {
    let path = format!("/v1/collections/events/tables/{table}/versions");
    match server.http("GET", &path, Some(token), None) {
        (200, Value::Array(versions)) => versions.len(),
        _ => 0,
    }
}

fn run(publishers: usize) -> Run {
    let broker = common::serve::broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let connection = many::connection(broker.bootstrap_servers());
    let plugin = common::guest("passthrough");
    let started = Instant::now();
    let mut tokens = Vec::new();
    for i in 0..publishers {
        if i % TENANT == 0 {
            let token = server.tenant(&format!("tenant-{}", i / TENANT), json!({}));
            many::collection(&server, &token, "events", &connection);
            let sha = many::plugin(&server, &token, &plugin);
            tokens.push((token, sha));
        }
        broker.create_topic(&format!("t{i}"), 1).unwrap();
        let (token, sha) = tokens.last().unwrap();
        many::register(&server, token, "events", i, sha);
    }
    let register_s = started.elapsed().as_secs_f64();
    // Every group joined and settled before the node is watched.
    std::thread::sleep(Duration::from_secs(10));
    let (idle_cores, sample) = idle(server.pid());

    // One message to each topic, all sent at once by one producer; the clock starts as they are sent.
    let producer = common::stream::producer(broker.bootstrap_servers());
    let values = common::stream::clicks(0, publishers);
    let started = Instant::now();
    common::block_on(async {
        let sends = (0..publishers).map(|i| {
            let topic = format!("t{i}");
            let producer = &producer;
            let value = &values[i];
            async move {
                let record = rdkafka::producer::FutureRecord::<(), _>::to(&topic).payload(value.as_str());
                producer.send(record, Duration::from_secs(30)).await.map_err(|(e, _)| e).expect("acknowledged");
            }
        });
        futures::future::join_all(sends).await;
    });
    let mut waiting: Vec<usize> = (0..publishers).collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !waiting.is_empty() {
        waiting.retain(|&i| versions(&server, &tokens[i / TENANT].0, &format!("t{i}")) == 0);
        assert!(Instant::now() < deadline, "{} publishers committed nothing in 300 s", waiting.len());
        std::thread::sleep(Duration::from_millis(100));
    }
    let first_commit_s = started.elapsed().as_secs_f64();

    // A restart on the same data: compiled plugins come from the artifact cache.
    let data = server.data_dir.clone();
    server.stop();
    let started = Instant::now();
    let server = Server::start(&data);
    let deadline = Instant::now() + Duration::from_secs(300);
    while holding(&server) < publishers {
        assert!(
            Instant::now() < deadline,
            "every publisher consuming again within 300 s: {} of {publishers} are\n{}",
            holding(&server),
            server.text("/metrics", common::serve::ADMIN)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let restart_s = started.elapsed().as_secs_f64();
    Run { publishers, register_s, idle_cores, sample, first_commit_s, restart_s }
}

/// The share that is librdkafka's: `n` consumers with the settings weir's
/// workers use, in this process, each its own group on its own topic (of Tansu, in a process of its own, so that
/// this one holds only the consumers), polled by one thread, idle. Returns
/// MB and threads per consumer, and the cores this process uses.
fn librdkafka_alone(n: usize) -> (f64, f64, f64) {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let broker = common::tansu::Tansu::start();
    let pid = std::process::id();
    let before = sample(pid);
    let consumers: Vec<BaseConsumer> = (0..n)
        .map(|i| {
            broker.create_topic(&format!("alone-{i}"), 1);
            let mut config = ClientConfig::new();
            for (key, value) in weir::sources::kafka::CONSUMER_DEFAULTS {
                config.set(*key, *value);
            }
            let consumer: BaseConsumer = config
                .set("bootstrap.servers", &broker.address)
                .set("group.id", format!("alone-{i}"))
                .set("enable.auto.commit", "false")
                .set("heartbeat.interval.ms", "500")
                .create()
                .unwrap();
            consumer.subscribe(&[&format!("alone-{i}")]).unwrap();
            consumer
        })
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let polling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for consumer in &consumers {
                    let _ = consumer.poll(Duration::ZERO);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    // Tansu lets a group join after about half the session timeout.
    std::thread::sleep(Duration::from_secs(10));
    let (cores, after) = idle(pid);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    polling.join().unwrap();
    let n = n as f64;
    ((after.rss_mb - before.rss_mb) / n, (after.threads as f64 - before.threads as f64) / n, cores)
}

fn main() {
    let counts: Vec<usize> =
        std::env::args().skip_while(|a| a != "--publishers").nth(1).map_or(vec![10, 100], |list| {
            list.split(',').map(|n| n.parse().expect("--publishers takes numbers")).collect()
        });
    let empty = {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(&dir.path().join("data"));
        std::thread::sleep(Duration::from_secs(3));
        let (cores, sample) = idle(server.pid());
        println!(
            "\ndensity: an empty weir serve node holds {:.0} MB RSS and {} threads, and uses {:.3} of a core idle",
            sample.rss_mb, sample.threads, cores
        );
        sample
    };
    let alone: Vec<(usize, (f64, f64, f64))> = counts.iter().map(|&n| (n, librdkafka_alone(n))).collect();
    let runs: Vec<Run> = counts.iter().map(|&n| run(n)).collect();
    println!(
        "publishers in tenants of {TENANT} (one connection and consumer each), each its own 1-partition topic on the embedded broker; idle over {} s after registration; {} cores",
        IDLE.as_secs(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>10} {:>11} {:>8} {:>12} {:>8} {:>12} {:>11} {:>15} {:>10}",
        "publishers",
        "register s",
        "RSS MB",
        "MB/publisher",
        "threads",
        "threads/pub",
        "idle cores",
        "first commit s",
        "restart s"
    );
    for r in &runs {
        let n = r.publishers as f64;
        println!(
            "{:>10} {:>11.1} {:>8.0} {:>12.2} {:>8} {:>12.2} {:>11.3} {:>15.1} {:>10.1}",
            r.publishers,
            r.register_s,
            r.sample.rss_mb,
            (r.sample.rss_mb - empty.rss_mb) / n,
            r.sample.threads,
            (r.sample.threads as f64 - empty.threads as f64) / n,
            r.idle_cores,
            r.first_commit_s,
            r.restart_s
        );
    }
    for (n, (mb, threads, cores)) in &alone {
        println!(
            "librdkafka alone, {n} idle consumers in one process (one group and topic each, on Tansu): {mb:.2} MB and {threads:.2} threads a consumer, {cores:.3} of a core"
        );
    }
    if let Some(last) = runs.last() {
        let owners: Vec<String> = last
            .sample
            .owners
            .iter()
            .map(|(name, n)| {
                let before = empty.owners.get(name).copied().unwrap_or(0);
                format!("{name} {n} (+{})", n - before.min(*n))
            })
            .collect();
        println!("threads of the {}-publisher node by name: {}", last.publishers, owners.join(", "));
    }
    println!(
        "(targets, issue 44: ≤ 1 MB RSS a publisher, ≤ 0.05 core idle for 1,000, a thread count that does not grow with publishers)"
    );
}
