//! End to end against a separate broker process and clients nobody here
//! wrote: Tansu (a Kafka-protocol broker, installed by scripts/setup.sh) on a
//! loopback port, events produced with Python's confluent-kafka, `weir stream`
//! as its own process, and the committed parquet read back with pyarrow.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weir::catalog::Catalog;

use common::stream::CLICKS_SCHEMA;
use common::tansu::{Tansu, python};

const GOOD: usize = 3000;
const BAD: usize = 6;

const PRODUCE: &str = r#"
import json, sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1]})
good, bad = int(sys.argv[2]), int(sys.argv[3])
for i in range(good):
    event = {"event_id": f"e2e-{i}", "user_id": i % 101, "url": "/docs", "ts": "2026-11-29T10:00:00Z", "duration_ms": i}
    p.produce("clicks", key=str(i % 101), value=json.dumps(event))
    if i % 500 == 0:
        p.poll(0)
for i in range(bad):
    p.produce("clicks", key=f"bad-{i}", value='{"event_id": "broken", "user_id": ')
left = p.flush(30)
assert left == 0, f"{left} messages not delivered"
print(good + bad)
"#;

const READ: &str = r#"
import sys, pyarrow.parquet as pq, pyarrow as pa
tables = [pq.read_table(path) for path in sys.argv[1:]]
t = pa.concat_tables(tables)
ids = t.column("event_id").to_pylist()
print(t.num_rows, len(set(ids)), sum(t.column("duration_ms").to_pylist()), sorted(set(t.column("_partition").to_pylist())))
"#;

#[test]
fn tansu_confluent_kafka_weir_pyarrow() {
    let broker = Tansu::start();
    broker.create_topic("clicks", 3);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("clicks.json"), CLICKS_SCHEMA).unwrap();
    std::fs::write(
        dir.path().join("publisher.toml"),
        "name = \"read_clicks\"\nflush_interval_mins = 1\noutput_tables = [\"clicks\"]\n[source.kafka]\ntopic = \"clicks\"\ndata_format = \"json\"\nschema = \"clicks.json\"\n[source.kafka.src_cfg]\n\"kafka.messages_rollover\" = 1000\n\"kafka.time_rollover_seconds\" = 1\n",
    )
    .unwrap();

    let produced = python(PRODUCE, &[&broker.address, &GOOD.to_string(), &BAD.to_string()]);
    assert_eq!(produced, (GOOD + BAD).to_string());

    let mut weir = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("stream")
        .arg(dir.path().join("publisher.toml"))
        .arg("--plugin")
        .arg(common::guest_path("read-clicks"))
        .args(["--bootstrap-servers", &broker.address, "--data-dir"])
        .arg(dir.path())
        // Tansu makes a joining member wait about half the session timeout.
        .args(["--client-setting", "session.timeout.ms=6000", "--client-setting", "heartbeat.interval.ms=500"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let catalog = Catalog::open(dir.path()).unwrap();
    let started = Instant::now();
    loop {
        let rows: u64 = catalog.versions("events", "clicks").unwrap().iter().map(|v| v.rows).sum();
        let dead = catalog.dead_letters("events/read_clicks").unwrap().len() as u64;
        if rows + dead >= (GOOD + BAD) as u64 {
            break;
        }
        if let Some(status) = weir.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(weir.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("weir stream exited early ({status}): {stderr}");
        }
        assert!(started.elapsed() < Duration::from_secs(120), "only {rows} rows and {dead} dead letters after 120 s");
        std::thread::sleep(Duration::from_millis(250));
    }
    let _ = Command::new("kill").arg("-TERM").arg(weir.id().to_string()).status();
    let status = weir.wait().unwrap();
    assert!(status.success(), "weir stream stops cleanly on SIGTERM: {status}");

    let files: Vec<String> = catalog
        .versions("events", "clicks")
        .unwrap()
        .into_iter()
        .flat_map(|v| v.files)
        .map(|f| dir.path().join(f.path).display().to_string())
        .collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let summary = python(READ, &args);
    let duration_sum: usize = (0..GOOD).sum();
    assert_eq!(summary, format!("{GOOD} {GOOD} {duration_sum} [0, 1, 2]"));
    assert_eq!(catalog.dead_letters("events/read_clicks").unwrap().len(), BAD);
}
