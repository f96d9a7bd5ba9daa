//! The stream worker against a real Kafka-protocol broker (librdkafka's mock
//! cluster, in-process): rollovers, dead letters, retries, broker outages,
//! consumer groups, and exactly-once commits. Each test has its own broker.

#[path = "../common/mod.rs"]
mod common;

mod dead_letters;
mod failures;
mod partitions;
mod rollover;

use std::collections::HashSet;
use std::time::Duration;

use weir::stream::{WorkerEvent, WorkerExit, WorkerOptions};

use common::stream::{Harness, clicks, publisher};
use serde_json::json;

fn fast_retries() -> WorkerOptions {
    WorkerOptions {
        first_backoff: Duration::from_millis(200),
        max_backoff: Duration::from_secs(1),
        ..WorkerOptions::default()
    }
}

fn assert_exactly_once(h: &Harness, expected: usize) {
    let ids = h.committed_event_ids();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no row is committed twice");
    assert_eq!(ids.len(), expected, "every row is committed");
}
