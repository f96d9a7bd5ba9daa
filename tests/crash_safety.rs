//! Crash safety, as a real process: `weir stream` is killed (SIGKILL, or an
//! abort at a named point of the pipeline) over and over while a
//! multi-partition topic fills, restarted each time, and in the end every good
//! message is in the committed table exactly once and every bad one is a dead
//! letter exactly once. The broker (and, for the Avro run, the schema
//! registry) lives in this test process, so it outlives every kill. The JSON
//! run's table is an Iceberg table too, and pyiceberg reads every row once
//! from its last snapshot as well.

mod common;

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::json;

use weir::embedded::registry::EmbeddedRegistry;
use weir::formats::confluent::frame;
use weir::formats::registry::{SchemaType, value_subject};
use weir::formats::{DataFormat, Format, encode_json_values};

use common::peers::{delta_py, iceberg_py};
use common::stream::{CLICKS_SCHEMA, Harness, clicks, produce_bytes};

const CLICKS_AVRO: &str = include_str!("../guest-examples/data/clicks.avsc");

const DECLARATION: &str = r#"
name = "read_clicks"
flush_interval_mins = 1
output_tables = ["clicks"]
[source.kafka]
topic = "clicks"
data_format = "json"
schema = "clicks.json"
[source.kafka.src_cfg]
"kafka.messages_rollover" = 40
"kafka.time_rollover_seconds" = 1
"#;

/// How the topic's values are written: JSON, or Avro framed by a registry.
struct Encoding {
    registry: Option<(EmbeddedRegistry, Format, u32)>,
    iceberg: bool,
}

impl Encoding {
    fn json() -> Self {
        Self { registry: None, iceberg: false }
    }

    /// JSON, into an Iceberg table (`table_format = "iceberg"`).
    fn json_iceberg() -> Self {
        Self { registry: None, iceberg: true }
    }

    fn avro_registry() -> Self {
        let registry = EmbeddedRegistry::start().unwrap();
        let id = registry.register(&value_subject("clicks"), SchemaType::Avro, CLICKS_AVRO, vec![]).unwrap();
        let format = Format::parse(DataFormat::Avro, CLICKS_AVRO, None).unwrap();
        Self { registry: Some((registry, format, id)), iceberg: false }
    }

    fn declaration(&self) -> String {
        let text = match self.registry {
            None => DECLARATION.to_string(),
            Some(_) => DECLARATION.replace("\"json\"", "\"avro\"").replace("clicks.json", "clicks.avsc"),
        };
        match self.iceberg {
            true => text.replacen("[source.kafka]", "table_format = \"iceberg\"\n[source.kafka]", 1),
            false => text,
        }
    }

    fn encode(&self, good: Vec<String>, wave: usize) -> Vec<Vec<u8>> {
        match &self.registry {
            None => good.into_iter().chain(bad_messages(wave)).map(String::into_bytes).collect(),
            Some((_, format, id)) => {
                let mut values = encode_json_values(format, &good, Some(*id)).unwrap();
                values.push(format!("unframed-{wave}").into_bytes());
                values.push(frame(4242, None, b"\x02"));
                values
            }
        }
    }
}

fn spawn(h: &Harness, encoding: &Encoding, crash_at: Option<&str>) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.arg("stream")
        .arg(h.dir.path().join("publisher.toml"))
        .arg("--plugin")
        .arg(common::guest_path("read-clicks"))
        .arg("--bootstrap-servers")
        .arg(h.broker.bootstrap_servers())
        .arg("--data-dir")
        .arg(h.dir.path())
        .args(["--client-setting", "session.timeout.ms=3000", "--client-setting", "heartbeat.interval.ms=300"])
        .env_remove("WEIR_CRASH_AT")
        .env_remove("WEIR_SCHEMA_REGISTRY_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(point) = crash_at {
        cmd.env("WEIR_CRASH_AT", point);
    }
    if let Some((registry, ..)) = &encoding.registry {
        cmd.arg("--schema-registry-url").arg(registry.url());
    }
    cmd.spawn().expect("spawning weir stream")
}

/// Waits for the child to exit by itself for up to `limit`, then kills it.
fn wait_or_kill(child: &mut Child, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().expect("try_wait").is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    false
}

fn bad_messages(wave: usize) -> Vec<String> {
    vec![
        format!("{{\"event_id\": \"bad-{wave}-a\", \"user_id\": "),
        json!({"event_id": format!("bad-{wave}-b"), "user_id": "x", "url": "/", "ts": "2026-11-29T10:00:00Z"})
            .to_string(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_any_moment_nothing_is_lost_or_doubled() {
    killed_over_and_over(Encoding::json_iceberg()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_any_moment_on_an_avro_registry_topic_nothing_is_lost_or_doubled() {
    killed_over_and_over(Encoding::avro_registry()).await;
}

async fn killed_over_and_over(encoding: Encoding) {
    let h = Harness::new(3);
    std::fs::write(h.dir.path().join("publisher.toml"), encoding.declaration()).unwrap();
    std::fs::write(h.dir.path().join("clicks.json"), CLICKS_SCHEMA).unwrap();
    std::fs::write(h.dir.path().join("clicks.avsc"), CLICKS_AVRO).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(20261129);
    let (mut good, mut bad) = (0usize, 0usize);
    let points: Vec<&str> =
        ["after-decode", "during-publish", "after-publish", "after-iceberg-metadata", "after-catalog-commit"]
            .into_iter()
            .filter(|p| encoding.iceberg || *p != "after-iceberg-metadata")
            .collect();
    let mut crashed_at_points = 0;

    for round in 0..12 {
        let wave = clicks(good, 120);
        good += wave.len();
        let values = encoding.encode(wave, round);
        bad += values.len() - 120;
        produce_bytes(h.broker.bootstrap_servers(), "clicks", &values).await;

        if round % 2 == 0 {
            // A named point: the process aborts there by itself.
            let point = points[(round / 2) % points.len()];
            let mut child = spawn(&h, &encoding, Some(point));
            if wait_or_kill(&mut child, Duration::from_secs(30)) {
                crashed_at_points += 1;
            }
        } else {
            // SIGKILL at a random moment.
            let mut child = spawn(&h, &encoding, None);
            tokio::time::sleep(Duration::from_millis(rng.random_range(300..3000))).await;
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
        }
    }
    assert!(crashed_at_points >= 4, "the crash points were reached ({crashed_at_points} of 6)");

    // One last run, left alone until everything is in, then stopped gracefully.
    let mut child = spawn(&h, &encoding, None);
    let wanted = (good + bad) as u64;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let rows = h.committed_event_ids().len() as u64;
        let dead = h.catalog.dead_letters("events/read_clicks").unwrap().len() as u64;
        if rows + dead >= wanted || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc_kill(child.id() as i32, 15) };
    assert!(wait_or_kill(&mut child, Duration::from_secs(30)), "SIGTERM stops weir stream");

    let ids = h.committed_event_ids();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "a good message was committed twice");
    assert_eq!(ids.len(), good, "a good message was lost");
    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    let coordinates: HashSet<(i32, i64)> = dead.iter().map(|d| (d.partition, d.offset)).collect();
    assert_eq!(coordinates.len(), dead.len(), "a bad message was recorded twice");
    assert_eq!(dead.len(), bad, "a bad message was lost");

    // The Delta log was repaired after every crash between the catalog's commit
    // and its own: every reader sees the catalog's latest version, with every row once.
    let latest = h.catalog.versions("events", "clicks").unwrap().last().unwrap().version;
    let root = h.dir.path().join(weir::tables::delta::table_dir("events", "clicks"));
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "event_id", "--versions", &latest.to_string()]);
    assert_eq!(read["latest"], latest, "the log has every version the catalog committed");
    let mut ids = ids;
    ids.sort();
    every_reader_reads(&read, latest, &ids);

    // An Iceberg table's last snapshot is the catalog's latest version, with every row once.
    if encoding.iceberg {
        let db = h.dir.path().join("catalog.db");
        let read = iceberg_py(&["read", db.to_str().unwrap(), "events.clicks", "--columns", "event_id"]);
        assert_eq!(read["current"], latest, "the pointer is at the latest version");
        for reader in ["pyiceberg", "polars", "duckdb"] {
            let mut seen: Vec<String> =
                read["rows"][reader].as_array().unwrap().iter().map(|r| r[0].as_str().unwrap().to_string()).collect();
            seen.sort();
            assert_eq!(seen, ids, "{reader} reads every committed row once");
        }
    }
}

/// Killed between the catalog's commit and the Delta log's, with another
/// engine's commit (a deltalake compaction) in the log before weir restarts:
/// the version the log lacked goes in after it, once, and every reader sees
/// every event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_the_catalog_and_the_log_with_another_writers_commit_before_the_restart() {
    let (h, encoding, root) = json_publisher();
    let values = |from: usize| -> Vec<Vec<u8>> { clicks(from, 120).into_iter().map(String::into_bytes).collect() };
    let run_until = |rows: usize| {
        let mut child = spawn(&h, &encoding, None);
        let deadline = Instant::now() + Duration::from_secs(90);
        while h.committed_event_ids().len() < rows && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        // SAFETY: plain kill(2) of our own child.
        unsafe { libc_kill(child.id() as i32, 15) };
        assert!(wait_or_kill(&mut child, Duration::from_secs(30)), "SIGTERM stops weir stream");
    };

    produce_bytes(h.broker.bootstrap_servers(), "clicks", &values(0)).await;
    run_until(120);
    produce_bytes(h.broker.bootstrap_servers(), "clicks", &values(120)).await;
    let mut child = spawn(&h, &encoding, Some("after-catalog-commit"));
    assert!(wait_or_kill(&mut child, Duration::from_secs(60)), "weir stream crashed after the catalog's commit");
    let lost = h.catalog.unlogged_versions("events", "clicks").unwrap();
    assert_eq!(lost.len(), 1, "one version is in the catalog and not the log");
    let compacted = delta_py(&["write", root.to_str().unwrap(), "compact"])["version"].as_i64().unwrap();

    run_until(240);
    let ids = h.committed_event_ids();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 240, "every event committed once");
    let placed = h.catalog.delta_version_of("events", "clicks", lost[0].version).unwrap().flatten();
    assert!(
        placed.is_some_and(|d| d > compacted),
        "version {} went in after the compaction: {placed:?}",
        lost[0].version
    );
    let latest = weir::tables::delta::latest(h.catalog.store(), &weir::tables::delta::table_dir("events", "clicks"))
        .unwrap()
        .unwrap();
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "event_id", "--versions", &latest.to_string()]);
    let mut ids = ids;
    ids.sort();
    every_reader_reads(&read, latest, &ids);
}

/// Killed after the Delta log took a version and before the catalog noted
/// where: on restart the version is found in the log, not written again, and
/// every reader sees every event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_the_logs_commit_and_the_catalogs_note_of_it() {
    let (h, encoding, root) = json_publisher();
    let values: Vec<Vec<u8>> = clicks(0, 120).into_iter().map(String::into_bytes).collect();
    produce_bytes(h.broker.bootstrap_servers(), "clicks", &values).await;
    let mut child = spawn(&h, &encoding, Some("after-delta-commit"));
    assert!(wait_or_kill(&mut child, Duration::from_secs(60)), "weir stream crashed after the log's commit");
    let unnoted = h.catalog.unlogged_versions("events", "clicks").unwrap();
    assert_eq!(unnoted.len(), 1, "one version is in the log and not noted in the catalog");

    let values: Vec<Vec<u8>> = clicks(120, 120).into_iter().map(String::into_bytes).collect();
    produce_bytes(h.broker.bootstrap_servers(), "clicks", &values).await;
    let mut child = spawn(&h, &encoding, None);
    let deadline = Instant::now() + Duration::from_secs(90);
    while h.committed_event_ids().len() < 240 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc_kill(child.id() as i32, 15) };
    assert!(wait_or_kill(&mut child, Duration::from_secs(30)), "SIGTERM stops weir stream");

    assert!(h.catalog.unlogged_versions("events", "clicks").unwrap().is_empty(), "every version is noted");
    let placed = h.catalog.delta_version_of("events", "clicks", unnoted[0].version).unwrap().flatten();
    assert_eq!(placed, Some(1), "version 1 is noted where the crashed run wrote it");
    let latest = weir::tables::delta::latest(h.catalog.store(), &weir::tables::delta::table_dir("events", "clicks"))
        .unwrap()
        .unwrap();
    let versions = h.catalog.versions("events", "clicks").unwrap().last().unwrap().version;
    assert_eq!(latest, versions, "the table's log: its creation, then one commit per weir version");
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "event_id", "--versions", &latest.to_string()]);
    let mut ids = h.committed_event_ids();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 240, "every event committed once");
    ids.sort();
    every_reader_reads(&read, latest, &ids);
}

/// A harness with the JSON publisher's declaration and schema in place, and
/// where its table is.
fn json_publisher() -> (Harness, Encoding, std::path::PathBuf) {
    let h = Harness::new(3);
    let encoding = Encoding::json();
    std::fs::write(h.dir.path().join("publisher.toml"), encoding.declaration()).unwrap();
    std::fs::write(h.dir.path().join("clicks.json"), CLICKS_SCHEMA).unwrap();
    let root = h.dir.path().join(weir::tables::delta::table_dir("events", "clicks"));
    (h, encoding, root)
}

/// Each engine of `delta_py read` read the table at `version` as exactly
/// the keys `ids` (sorted), each once.
fn every_reader_reads(read: &serde_json::Value, version: i64, ids: &[String]) {
    for reader in ["duckdb", "polars", "deltalake"] {
        let seen = &read["versions"][version.to_string()][reader]["keys"];
        let seen: Vec<String> = seen.as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
        assert_eq!(seen, ids, "{reader} reads every committed row once");
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}
