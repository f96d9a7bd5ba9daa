//! A cluster's throughput: the same topic (the stream benchmark's click
//! events, 6 partitions on Tansu) read by 1, 2 and 3 `weir serve` nodes on one
//! PostgreSQL catalog and one S3 bucket (moto's server), as `tests/cluster.rs`
//! runs them. On this machine the nodes share its cores, so the figure that
//! matters is what a node costs: the CPU per message of all the nodes
//! together, against one node's.
//!
//! `cargo bench -p weir --bench cluster [-- --messages N]` (default 400,000)

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "stream/dataset.rs"]
#[allow(dead_code)]
mod dataset;

use std::time::{Duration, Instant};

use serde_json::json;

use common::postgres::Postgres;
use common::s3::S3;
use common::serve::{Server, declaration};
use common::tansu::Tansu;

/// One run: `nodes` nodes reading the topic as it is produced.
struct Run {
    nodes: usize,
    seconds: f64,
    /// CPU seconds of all the nodes over the run.
    cpu: f64,
    broker_cpu: f64,
}

fn cpu(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|p| common::cpu_of(*p)).map(|d| d.as_secs_f64()).sum()
}

fn committed(node: &Server, token: &str) -> u64 {
    let (status, versions) = node.http("GET", "/v1/collections/events/tables/clicks/versions", Some(token), None);
    if status != 200 {
        return 0;
    }
    versions.as_array().unwrap().iter().map(|v| v["rows"].as_u64().unwrap()).sum()
}

/// Whether every partition is held, by `nodes` live nodes.
fn split(node: &Server, token: &str, nodes: usize) -> bool {
    let status = node.cli_json(token, &["publisher", "status", "events/read_clicks"]);
    let held: Vec<usize> = status["nodes"]
        .as_array()
        .map(|n| n.iter().filter(|n| n["live"] == true).filter_map(|n| Some(n["partitions"].as_array()?.len())).collect())
        .unwrap_or_default();
    held.len() == nodes && held.iter().all(|p| *p > 0) && held.iter().sum::<usize>() == dataset::PARTITIONS as usize
}

/// `nodes` nodes on a fresh catalog and bucket prefix and a fresh broker: the
/// publisher is registered on the empty topic; once the group has split the
/// partitions between the nodes, `messages` are produced, and the run lasts
/// until the last of them is committed.
fn run(nodes: usize, postgres: &Postgres, s3: &S3, messages: usize) -> Run {
    let broker = Tansu::start();
    broker.create_topic("clicks", dataset::PARTITIONS as u32);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("weir.key");
    std::fs::write(&key, "5e".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let catalog = postgres.database(&format!("bench_cluster_{nodes}"));
    let store = s3.url(&format!("nodes-{nodes}"));
    let args = ["--catalog", &catalog, "--store", &store, "--secret-key-file", key.to_str().unwrap()];
    let servers: Vec<Server> =
        (0..nodes).map(|i| Server::start_with_env(&dir.path().join(format!("node-{i}")), &args, &s3.env())).collect();
    let pids: Vec<u32> = servers.iter().map(Server::pid).collect();
    let a = &servers[0];
    let token = a.tenant("bench", json!({}));
    a.cli_ok(&token, &["collection", "create", "events", "--bootstrap-servers", &broker.address]);
    let src_cfg = "\"kafka.messages_rollover\" = 65536\n\"kafka.size_rollover_mb\" = 64\n\"kafka.time_rollover_seconds\" = 2";
    let decl = declaration(dir.path(), src_cfg);
    let plugin = common::guest_path("read_clicks").display().to_string();
    a.cli_ok(&token, &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", &plugin]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !split(a, &token, nodes) {
        assert!(Instant::now() < deadline, "{nodes} nodes: the group did not split the partitions in 120 s");
        std::thread::sleep(Duration::from_millis(200));
    }

    let (cpu_before, broker_before, started) = (cpu(&pids), common::cpu_of(broker.pid()), Instant::now());
    dataset::produce(&broker.address, &[], "clicks", messages);
    let deadline = Instant::now() + Duration::from_secs(600);
    while committed(a, &token) < messages as u64 {
        assert!(Instant::now() < deadline, "{nodes} nodes: only {} of {messages} rows after 600 s", committed(a, &token));
        std::thread::sleep(Duration::from_millis(50));
    }
    let seconds = started.elapsed().as_secs_f64();
    let broker_cpu = common::cpu_of(broker.pid()).zip(broker_before).map_or(0.0, |(a, b)| (a - b).as_secs_f64());
    assert_eq!(committed(a, &token), messages as u64, "{nodes} nodes: every message once");
    Run { nodes, seconds, cpu: cpu(&pids) - cpu_before, broker_cpu }
}

fn main() {
    let messages = std::env::args()
        .skip_while(|a| a != "--messages")
        .nth(1)
        .map_or(400_000, |n| n.parse().expect("--messages takes a number"));
    let postgres = Postgres::start();
    let s3 = S3::start("weir-bench");
    let runs: Vec<Run> = (1..=3).map(|nodes| run(nodes, &postgres, &s3, messages)).collect();
    let one = &runs[0];
    let per_message = |r: &Run| r.cpu * 1e6 / messages as f64;
    println!(
        "\ncluster: {messages} click events on a {}-partition topic (Tansu), produced once the nodes hold their partitions, until the last is committed; one PostgreSQL, one S3 bucket (moto); {} cores",
        dataset::PARTITIONS,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("{:>5} {:>10} {:>9} {:>14} {:>12} {:>13}", "nodes", "msg/s", "seconds", "CPU µs/msg", "vs 1 node", "broker cores");
    for r in &runs {
        println!(
            "{:>5} {:>10.0} {:>9.2} {:>14.2} {:>+11.1}% {:>13.2}",
            r.nodes,
            messages as f64 / r.seconds,
            r.seconds,
            per_message(r),
            (per_message(r) / per_message(one) - 1.0) * 100.0,
            r.broker_cpu / r.seconds
        );
    }
    println!("(target: the nodes' CPU per message within 10 % of one node's)");
}
