//! Publishers that share a Kafka consumer (a node's workers reading through
//! one connection) stay independent: on one `weir serve` node and Tansu, ten
//! publishers of one collection run on one consumer; one paused, one whose
//! plugin traps on every batch and one whose topic is deleted take no
//! partition from the others (`weir_partitions_revoked_total` stays 0 for
//! them), which go on committing every message once.

mod common;

use std::time::Duration;

use serde_json::json;

use common::block_on;
use common::many;
use common::serve::{ADMIN, Server, poll};
use common::stream::{clicks, produce};
use common::tansu::Tansu;

const N: usize = 10;

fn rows(server: &Server, token: &str, i: usize) -> u64 {
    let path = format!("/v1/collections/events/tables/t{i}/versions");
    match server.http("GET", &path, Some(token), None) {
        (200, serde_json::Value::Array(versions)) => versions.iter().map(|v| v["rows"].as_u64().unwrap()).sum(),
        _ => 0,
    }
}

fn state(server: &Server, token: &str, i: usize) -> String {
    let (_, status) = server.http("GET", &format!("/v1/collections/events/publishers/p{i}"), Some(token), None);
    status["worker"]["state"].as_str().unwrap_or_default().to_string()
}

fn kafka_consumers(server: &Server) -> u64 {
    server.http("GET", "/health", None, None).1["kafka_consumers"].as_u64().unwrap()
}

#[test]
fn a_paused_a_trapping_and_a_deleted_topics_publisher_disturb_none_of_their_neighbours() {
    let broker = Tansu::start();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({}));
    many::collection(&server, &token, "events", &many::connection(&broker.address));
    let passthrough = many::plugin(&server, &token, &common::guest("passthrough"));
    let trapping = many::plugin(&server, &token, &common::guest("hostile-panic"));
    for i in 0..N {
        broker.create_topic(&format!("t{i}"), 2);
        many::register(&server, &token, "events", i, if i == 1 { &trapping } else { &passthrough });
    }
    assert_eq!(kafka_consumers(&server), 1, "one connection, one consumer for its {N} publishers");

    // Every one's first messages land (p1's plugin traps: it retries, then fails).
    for i in 0..N {
        block_on(produce(&broker.address, &format!("t{i}"), &clicks(i * 1000, 20)));
    }
    for i in (0..N).filter(|&i| i != 1) {
        poll(&format!("t{i}'s first 20 rows"), || (rows(&server, &token, i) == 20).then_some(()));
    }

    // p0 paused; p1 failed for good after its retries; p2's topic deleted under it (on
    // Tansu, that once crashed librdkafka, and the node with every tenant on it).
    server.cli_ok(&token, &["publisher", "pause", "events/p0"]);
    poll("p1 failed after its retries", || (state(&server, &token, 1) == "failed").then_some(()));
    broker.delete_topic("t2");

    // The others carry on, every message once, without losing a partition.
    for i in 3..N {
        block_on(produce(&broker.address, &format!("t{i}"), &clicks(i * 1000 + 20, 20)));
    }
    block_on(produce(&broker.address, "t0", &clicks(20, 20)));
    for i in 3..N {
        poll(&format!("t{i}'s next 20 rows"), || (rows(&server, &token, i) == 40).then_some(()));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(rows(&server, &token, 0), 20, "a paused publisher commits nothing");
    assert_eq!(rows(&server, &token, 1), 0, "a trapping plugin commits nothing");
    assert_eq!(rows(&server, &token, 2), 20, "what the deleted topic's publisher committed stays");
    let metrics = server.text("/metrics", ADMIN);
    for i in 3..N {
        let revoked = many::series(&metrics, "weir_partitions_revoked_total", &[("publisher", &format!("p{i}"))]);
        assert!(revoked.iter().all(|(_, n)| *n == 0.0), "p{i} lost partitions to its neighbours' changes: {revoked:?}");
    }
    assert_eq!(kafka_consumers(&server), 1, "the neighbours still share one consumer");

    // p0 resumed: what came while it was paused lands once.
    server.cli_ok(&token, &["publisher", "resume", "events/p0"]);
    poll("t0's paused rows", || (rows(&server, &token, 0) == 40).then_some(()));
    for i in (0..N).filter(|&i| i != 1 && i != 2) {
        let export = dir.path().join(format!("t{i}.parquet"));
        server.cli_ok(&token, &["table", "export", &format!("events/t{i}"), "-o", export.to_str().unwrap()]);
        let mut ids = common::serve::event_ids(&export);
        ids.sort();
        let mut expected: Vec<String> = (i * 1000..i * 1000 + 40).map(|n| format!("evt-{n}")).collect();
        expected.sort();
        assert_eq!(ids, expected, "table t{i}: every message once");
    }
}
