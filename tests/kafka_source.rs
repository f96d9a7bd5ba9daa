//! What the Kafka source takes beyond a topic's values, through the whole
//! stream worker on the embedded broker: keys in every key format, plain
//! and registry-framed (made by independent producers, `tests/peers/keys.py`),
//! headers, subject strategies, AWS Glue's registry (moto), and where a new
//! publisher starts. The committed table is read back with pyarrow.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::producer::FutureRecord;
use serde_json::{Value, json};
use weir::embedded::registry::EmbeddedRegistry;
use weir::formats::registry::{RegistryClient, SubjectStrategy};
use weir::formats::writers::RegistryEvent;
use weir::formats::writers::{CrossCheckError, cross_check_topic};
use weir::formats::{DataFormat, Format, KeyFormat, protobuf};
use weir::publisher::StreamPublisher;
use weir::publisher::source::{KafkaConnection, SchemaRegistry};
use weir::stream::{WorkerEvent, WorkerOptions};

use common::peers::{glue_produce, keys_py, parquet_rows};
use common::stream::{Harness, producer, publisher_with};

const COUNT: usize = 20;
const VALUE_SCHEMA: &str = r#"{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}"#;
const KEY_JSON: &str = r#"{"type":"object","properties":{"user":{"type":"string"},"shard":{"type":"integer"}},"required":["user","shard"]}"#;
const KEY_AVRO: &str = r#"{"type":"record","name":"Key","namespace":"weir.test","fields":[{"name":"user","type":"string"},{"name":"shard","type":"long"}]}"#;
const KEY_PROTO: &str = "syntax = \"proto3\";\npackage weir.test;\nmessage Key { string user = 1; int64 shard = 2; }\n";

fn key_format(name: &str) -> KeyFormat {
    match name {
        "bytes" => KeyFormat::Bytes,
        "string" => KeyFormat::String,
        "json" => KeyFormat::Decoded(Format::parse(DataFormat::Json, KEY_JSON, None).unwrap()),
        "avro" => KeyFormat::Decoded(Format::parse(DataFormat::Avro, KEY_AVRO, None).unwrap()),
        "protobuf" => {
            KeyFormat::Decoded(Format::parse(DataFormat::Protobuf, KEY_PROTO, Some("weir.test.Key")).unwrap())
        }
        other => panic!("no key format {other}"),
    }
}

fn passthrough(h: &Harness, connection: KafkaConnection, key: KeyFormat, headers: bool) -> StreamPublisher {
    let value = Format::parse(DataFormat::Json, VALUE_SCHEMA, None).unwrap();
    let src_cfg = json!({"kafka.messages_rollover": COUNT + 1, "kafka.time_rollover_seconds": 1});
    let mut publisher = publisher_with(connection, &h.runtime, "passthrough", "clicks", value, src_cfg, None);
    publisher.source.key = key;
    publisher.source.headers = headers;
    publisher
}

/// The committed rows (`id`, `_key`, `_headers`), read with pyarrow.
fn committed(h: &Harness) -> Vec<Value> {
    let files: Vec<String> = h.committed_files().iter().map(|f| f.display().to_string()).collect();
    let out = keys_py(&[vec!["read".to_string()], files].concat());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("keys.py read printed no JSON ({e}): {out}"))
}

/// The `_key` weir must make of message `i`'s key in `format`.
fn expected_key(format: &str, i: usize) -> Value {
    if i % 5 == 0 {
        return Value::Null;
    }
    match format {
        "bytes" => json!(format!("hex:ff{:02x}{}", i % 256, hex(format!("k{i}").as_bytes()))),
        "string" => json!(format!("user-{i}")),
        _ => json!({"user": format!("u{i}"), "shard": i % 3}),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn keys_round_trip(format: &str, framed: bool) {
    let h = Harness::new(1);
    let registry = framed.then(|| EmbeddedRegistry::start().unwrap());
    let mut args: Vec<String> =
        ["produce", "--bootstrap", h.broker.bootstrap_servers(), "--topic", "clicks", "--key-format", format]
            .map(String::from)
            .to_vec();
    args.extend(["--count".into(), COUNT.to_string()]);
    if let Some(r) = &registry {
        args.extend(["--registry".into(), r.url()]);
    }
    if format == "protobuf" {
        let files = HashMap::from([("key.proto".to_string(), protobuf::ProtoFile::Source(KEY_PROTO.into()))]);
        let path = h.dir.path().join("key.desc");
        std::fs::write(&path, protobuf::compile("key.proto", files).unwrap().encode_to_vec()).unwrap();
        args.extend([
            "--descriptor-set".into(),
            path.display().to_string(),
            "--key-message".into(),
            "weir.test.Key".into(),
        ]);
    }
    keys_py(&args);

    let connection = match &registry {
        Some(r) => KafkaConnection {
            schema_registry: Some(SchemaRegistry { url: r.url(), ..SchemaRegistry::default() }),
            ..h.connection()
        },
        None => h.connection(),
    };
    let key = key_format(format);
    if let Some(registry) = &connection.schema_registry {
        // Registration's cross-check: the value's subject and, for a decoded key, the key's.
        let client = RegistryClient::new(registry).unwrap();
        let value = Format::parse(DataFormat::Json, VALUE_SCHEMA, None).unwrap();
        let checked = cross_check_topic(&value, &key, Default::default(), &client, "clicks").unwrap();
        let subjects: Vec<&str> = checked.iter().map(|v| v.subject.as_str()).collect();
        let decoded = matches!(key, KeyFormat::Decoded(_));
        assert_eq!(subjects, if decoded { vec!["clicks-value", "clicks-key"] } else { vec!["clicks-value"] });
        if decoded {
            // A key schema the registry's cannot be read with is refused, naming the key's subject.
            let other = r#"{"type":"object","properties":{"user":{"type":"integer"}},"required":["user"]}"#;
            let other = KeyFormat::Decoded(Format::parse(DataFormat::Json, other, None).unwrap());
            let wrong = cross_check_topic(&value, &other, Default::default(), &client, "clicks").unwrap_err();
            assert!(
                matches!(&wrong, CrossCheckError::Incompatible { subject, .. } if subject == "clicks-key")
                    || format != "json",
                "{wrong}"
            );
        }
    }
    let mut w = h.start(passthrough(&h, connection, key, format != "bytes"), WorkerOptions::default());
    let executions = w.commits_until(COUNT as u64 + 1).await;
    w.stop().await;

    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    let rows = committed(&h);
    if format == "bytes" {
        // Any bytes are a key: the last message's too.
        assert!(dead.is_empty(), "{:?}", dead.first().map(|d| &d.error));
        assert_eq!(rows.len(), COUNT + 1);
        assert!(rows.iter().all(|r| r.get("_headers").is_none()), "include_headers = false leaves the column out");
    } else {
        assert_eq!(dead.len(), 1, "the key that is not a {format} key is a dead letter");
        assert_eq!(dead[0].offset, COUNT as i64);
        let reason = &dead[0].error;
        let expected = if format == "string" { "the key is not UTF-8 text" } else { "the key: " };
        assert!(reason.starts_with(expected), "{reason}");
        assert_eq!(rows.len(), COUNT);
    }
    let rows_out: u64 = executions.iter().map(|e| e.rows_out).sum();
    assert_eq!(rows_out, rows.len() as u64);
    let headers =
        json!([{"key": "h", "value": "hex:31"}, {"key": "h", "value": "hex:32"}, {"key": "n", "value": null}]);
    for (i, row) in rows.iter().take(COUNT).enumerate() {
        assert_eq!(row["id"], json!(i), "each message once, in order");
        assert_eq!(row["_key"], expected_key(format, i), "row {i}");
        if format != "bytes" {
            assert_eq!(row["_headers"], headers, "row {i}: in order, the repeated key kept, the null value null");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_keys_without_headers() {
    keys_round_trip("bytes", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_keys() {
    keys_round_trip("string", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_keys() {
    keys_round_trip("json", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_keys_registry_framed() {
    keys_round_trip("json", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_keys() {
    keys_round_trip("avro", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_keys_registry_framed() {
    keys_round_trip("avro", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_keys() {
    keys_round_trip("protobuf", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_keys_registry_framed() {
    keys_round_trip("protobuf", true).await;
}

/// `kafka.start_from` a time in the middle of the topic: the rows before it
/// are absent, those at and after it there once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_publisher_starts_from_a_time() {
    let h = Harness::new(2);
    let base = 1_796_115_600_000i64;
    let p = producer(h.broker.bootstrap_servers());
    for i in 0..40i64 {
        let value = json!({"event_id": format!("evt-{i}"), "user_id": 1, "url": "/", "ts": "2026-11-29T10:00:00Z", "duration_ms": i}).to_string();
        let key = format!("key-{i}");
        let record =
            FutureRecord::to("clicks").key(&key).payload(&value).partition((i % 2) as i32).timestamp(base + i * 1000);
        p.send(record, Duration::from_secs(10)).await.map_err(|(e, _)| e).unwrap();
    }
    // Message 20 is at base + 20 s; 19.5 s starts there.
    let src_cfg = json!({"kafka.start_from": "2026-12-01T09:00:19.500Z", "kafka.messages_rollover": 20, "kafka.time_rollover_seconds": 1});
    let mut w = h.start(h.publisher("read-clicks", src_cfg, None), WorkerOptions::default());
    w.commits_until(20).await;
    // Later messages are read as usual.
    common::stream::produce(h.broker.bootstrap_servers(), "clicks", &common::stream::clicks(100, 4)).await;
    w.commits_until(4).await;
    w.stop().await;
    let mut ids = h.committed_event_ids();
    ids.sort_by_key(|id| id[4..].parse::<u32>().unwrap());
    let expected: Vec<String> = (20..40).chain(100..104).map(|i| format!("evt-{i}")).collect();
    assert_eq!(ids, expected);
}

/// Every connection to the broker cut for 30 s behind a relay, mid-stream:
/// `publisher status` and `/metrics` say the brokers are unreachable within
/// 10 s and that the lag is unknown; once the relay lets connections through
/// again, the worker goes on where it was, nothing lost or repeated.
#[test]
fn a_broker_cut_off_for_30_s_is_reported_and_nothing_is_lost() {
    use common::relay::Relay;
    use common::serve::{Server, registered};
    use common::tansu::Tansu;

    let rt = tokio::runtime::Runtime::new().unwrap();
    let relay_port = common::free_port();
    let broker = Tansu::start_with(common::free_port(), relay_port, &[]);
    broker.create_topic("clicks", 3);
    let relay = rt.block_on(Relay::start(relay_port, broker.address.parse().unwrap()));
    let bootstrap = format!("127.0.0.1:{relay_port}");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = registered(&server, dir.path(), &bootstrap);
    rt.block_on(common::stream::produce(&bootstrap, "clicks", &common::stream::clicks(0, 300)));
    server.wait_for_rows(&token, "events", "clicks", 300);
    let status = || server.http("GET", "/v1/collections/events/publishers/read_clicks", Some(&token), None).1;
    assert!(status()["broker_unreachable"].is_null());

    relay.cut();
    let cut = std::time::Instant::now();
    let seen = loop {
        let s = status();
        if !s["broker_unreachable"].is_null() {
            break s;
        }
        assert!(cut.elapsed() < Duration::from_secs(10), "status still says the brokers are reachable: {s}");
        std::thread::sleep(Duration::from_millis(250));
    };
    println!("status said so after {:?}: {}", cut.elapsed(), seen["broker_unreachable"]);
    assert!(seen["lag"].is_null(), "the lag is unknown, not 0: {seen}");
    assert!(seen["lag_error"].as_str().unwrap().contains("cannot reach its brokers"), "{seen}");
    let metrics = server.text("/metrics", common::serve::ADMIN);
    assert!(metrics.lines().any(|l| l.starts_with("weir_broker_unreachable{") && l.ends_with(" 1")), "{metrics}");
    let cli = server.cli_ok(&token, &["publisher", "status", "events/read_clicks"]);
    assert!(cli.contains("unreachable since"), "{cli}");

    std::thread::sleep(Duration::from_secs(30).saturating_sub(cut.elapsed()));
    rt.block_on(relay.open());
    rt.block_on(common::stream::produce(&bootstrap, "clicks", &common::stream::clicks(300, 300)));
    server.wait_for_rows(&token, "events", "clicks", 600);
    common::serve::poll("status to say the brokers answer again", || {
        status()["broker_unreachable"].is_null().then_some(())
    });
    assert!(status()["lag"].is_i64(), "{}", status());
}

/// A publisher reprocessed from version N with a fixed plugin: one version
/// removes the rows of the versions after N, the offsets move back, and the
/// fixed plugin writes those rows again: an independent reader (deltalake)
/// sees every event once, those after N as the fixed plugin wrote them. A
/// kill -9 while they are read again changes nothing.
#[test]
fn a_reprocess_reads_again_what_came_after_a_version_once_with_a_fixed_plugin() {
    use common::serve::{Server, broker, guest_file, registered};

    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data);
    let token = registered(&server, dir.path(), broker.bootstrap_servers());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(common::stream::produce(broker.bootstrap_servers(), "clicks", &common::stream::clicks(0, 150)));
    let versions = server.wait_for_rows(&token, "events", "clicks", 150);
    let n = versions.as_array().unwrap().last().unwrap()["version"].as_i64().unwrap();
    rt.block_on(common::stream::produce(broker.bootstrap_servers(), "clicks", &common::stream::clicks(150, 150)));
    server.wait_for_rows(&token, "events", "clicks", 300);

    let reprocess = |from: i64| {
        let from = from.to_string();
        let args = ["publisher", "reprocess", "events/read_clicks", "--from-version", &from, "--plugin"];
        server.cli(&token, &[&args[..], &[&guest_file("fixture-tag-rows")]].concat())
    };
    let missing = reprocess(999);
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("has no version 999"), "{said}");

    let done = reprocess(n);
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "{said}{}", String::from_utf8_lossy(&done.stderr));
    assert!(said.contains("removes the 150 rows of versions"), "{said}");
    // Killed while the rows after N are read again.
    server.kill();
    let server = Server::start(&data);
    server.wait_for_rows(&token, "events", "clicks", 300);

    let table = data.join("tables/acme/events/clicks");
    // Three engines at the table's latest version: every event once.
    let seen = common::peers::delta_py(&["read", table.to_str().unwrap(), "--key", "event_id", "--versions", ""]);
    let latest = seen["latest"].to_string();
    let seen = common::peers::delta_py(&["read", table.to_str().unwrap(), "--key", "event_id", "--versions", &latest]);
    let mut expected: Vec<String> = (0..300).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    for (reader, read) in seen["versions"][&latest].as_object().unwrap() {
        assert_eq!(read["keys"], json!(expected), "{reader} sees every event once");
    }
    let read = common::tansu::python(
        r#"
import json, os, sys, deltalake
rows = deltalake.DeltaTable(sys.argv[1]).to_pyarrow_table(columns=["event_id", "tag"]).to_pylist()
print(json.dumps(rows))
sys.stdout.flush()
os._exit(0)
"#,
        &[table.to_str().unwrap()],
    );
    let rows: Vec<Value> = serde_json::from_str(&read).unwrap();
    assert_eq!(rows.len(), 300);
    for row in &rows {
        let id = row["event_id"].as_str().unwrap();
        let i: usize = id[4..].parse().unwrap();
        let expected = if i < 150 { Value::Null } else { json!("fixed") };
        assert_eq!(row["tag"], expected, "{id}: rows up to version {n} stay, the rest are the fixed plugin's");
    }
}

const CLICK_AVRO: &str = r#"{"type":"record","name":"Click","namespace":"weir.test","fields":[{"name":"id","type":"long"},{"name":"url","type":"string"}]}"#;

/// One topic carrying two record types, each registered under the subject
/// `strategy` names: the declared one becomes rows, the other dead letters
/// that say which record they carried.
async fn two_records_on_one_topic(strategy: SubjectStrategy, peer: &str, subject: &str) {
    let h = Harness::new(1);
    let registry = EmbeddedRegistry::start().unwrap();
    let bootstrap = h.broker.bootstrap_servers();
    let url = registry.url();
    common::peers::subjects_py(&[
        "records",
        "--bootstrap",
        bootstrap,
        "--topic",
        "clicks",
        "--registry",
        &url,
        "--strategy",
        peer,
        "--count",
        "20",
    ]);
    let connection = KafkaConnection {
        schema_registry: Some(SchemaRegistry { url: url.clone(), ..SchemaRegistry::default() }),
        ..h.connection()
    };
    let format = Format::parse(DataFormat::Avro, CLICK_AVRO, None).unwrap();
    let client = RegistryClient::new(connection.schema_registry.as_ref().unwrap()).unwrap();
    let checked = cross_check_topic(&format, &KeyFormat::Bytes, strategy, &client, "clicks").unwrap();
    assert_eq!(checked[0].subject, subject, "registration cross-checks the subject the strategy names");
    let src_cfg = json!({"kafka.messages_rollover": 20, "kafka.time_rollover_seconds": 1});
    let mut publisher = publisher_with(connection, &h.runtime, "passthrough", "clicks", format, src_cfg, None);
    publisher.source.subjects = strategy;
    let mut w = h.start(publisher, WorkerOptions::default());
    let executions = w.commits_until(20).await;
    w.stop().await;
    assert_eq!(executions.iter().map(|e| e.rows_out).sum::<u64>(), 10, "the ten Clicks");
    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    assert_eq!(dead.len(), 10, "the ten Views");
    assert!(dead.iter().all(|d| d.offset % 2 == 1));
    assert!(dead[0].error.contains("carries record `weir.test.View`"), "{}", dead[0].error);
    let rows = committed(&h);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (0..20).step_by(2).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_name_strategy() {
    two_records_on_one_topic(SubjectStrategy::RecordNameStrategy, "record", "weir.test.Click").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_record_name_strategy() {
    two_records_on_one_topic(SubjectStrategy::TopicRecordNameStrategy, "topic_record", "clicks-weir.test.Click").await;
}

/// An Avro writer schema that uses a named type from another subject (a
/// schema reference) is read like one that defines it inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_schema_references() {
    let h = Harness::new(1);
    let registry = EmbeddedRegistry::start().unwrap();
    let url = registry.url();
    let bootstrap = h.broker.bootstrap_servers();
    common::peers::subjects_py(&[
        "references",
        "--bootstrap",
        bootstrap,
        "--topic",
        "clicks",
        "--registry",
        &url,
        "--count",
        "20",
    ]);
    let declared = r#"{"type":"record","name":"Place","namespace":"weir.test","fields":[
        {"name":"id","type":"long"},
        {"name":"at","type":{"type":"record","name":"Geo","fields":[{"name":"lat","type":"double"},{"name":"lon","type":"double"}]}},
        {"name":"was","type":["null","Geo"],"default":null}]}"#;
    let format = Format::parse(DataFormat::Avro, declared, None).unwrap();
    let connection = KafkaConnection {
        schema_registry: Some(SchemaRegistry { url: url.clone(), ..SchemaRegistry::default() }),
        ..h.connection()
    };
    let client = RegistryClient::new(connection.schema_registry.as_ref().unwrap()).unwrap();
    cross_check_topic(&format, &KeyFormat::Bytes, SubjectStrategy::default(), &client, "clicks").unwrap();
    let src_cfg = json!({"kafka.messages_rollover": 20, "kafka.time_rollover_seconds": 1});
    let publisher = publisher_with(connection, &h.runtime, "passthrough", "clicks", format, src_cfg, None);
    let mut w = h.start(publisher, WorkerOptions::default());
    let executions = w.commits_until(20).await;
    w.stop().await;
    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    assert!(dead.is_empty(), "{:?}", dead.first().map(|d| &d.error));
    assert_eq!(executions.iter().map(|e| e.rows_out).sum::<u64>(), 20);
    let mut lats = Vec::new();
    for file in h.committed_files() {
        for batch in weir::input::read(&file, None).unwrap().batches {
            use arrow::array::AsArray;
            let at = batch.column_by_name("at").unwrap().as_struct();
            let lat = at.column_by_name("lat").unwrap().as_primitive::<arrow::datatypes::Float64Type>();
            lats.extend(lat.values().iter().copied());
        }
    }
    lats.sort_by(f64::total_cmp);
    assert_eq!(lats, (0..20).map(|i| i as f64 / 10.0).collect::<Vec<_>>());
}

/// Values framed by AWS's Glue serializer (the `aws-glue-schema-registry`
/// package over moto's Glue API), some zlib-compressed: cross-checked at
/// registration, read through an evolution v1 → v2 and a registry outage
/// (held, not dead-lettered), and a writer schema the declared one cannot
/// read made dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_registry_avro() {
    let h = Harness::new(1);
    // moto serves Glue's API; its relay is the outage.
    let moto = common::s3::S3::start("unused");
    let bootstrap = h.broker.bootstrap_servers().to_string();
    let produce =
        |schema: &str, start: usize, count: usize| glue_produce(&moto, &bootstrap, "avro", schema, start, count);
    produce("v1", 0, 10);
    let registry = moto.glue(&moto.endpoint);
    let client = RegistryClient::new(&registry).unwrap();
    let strategy = SubjectStrategy::default();

    // Registration: the declared schema against the latest version of the schema named after the topic.
    let declared = r#"{"type":"record","name":"Click","namespace":"weir.test","fields":[
        {"name":"id","type":"long"},{"name":"url","type":"string"},
        {"name":"referrer","type":["null","string"],"default":null}]}"#;
    let format = Format::parse(DataFormat::Avro, declared, None).unwrap();
    let checked = cross_check_topic(&format, &KeyFormat::Bytes, strategy, &client, "clicks").unwrap();
    assert_eq!((checked[0].subject.as_str(), checked[0].version), ("clicks-value", 1));
    let wrong = Format::parse(
        DataFormat::Avro,
        r#"{"type":"record","name":"Click","namespace":"weir.test","fields":[{"name":"id","type":"string"}]}"#,
        None,
    )
    .unwrap();
    let refused = cross_check_topic(&wrong, &KeyFormat::Bytes, strategy, &client, "clicks").unwrap_err();
    assert!(matches!(refused, CrossCheckError::Incompatible { .. }), "{refused}");
    let missing = cross_check_topic(&format, &KeyFormat::Bytes, strategy, &client, "views").unwrap_err();
    assert!(matches!(missing, CrossCheckError::NoSubject { .. }), "{missing}");

    let connection = KafkaConnection { schema_registry: Some(registry), ..h.connection() };
    let src_cfg = json!({"kafka.messages_rollover": 10, "kafka.time_rollover_seconds": 1});
    let publisher = publisher_with(connection, &h.runtime, "passthrough", "clicks", format, src_cfg, None);
    let mut w = h.start(publisher, WorkerOptions::default());
    w.commits_until(10).await;

    // Producers move to v2 while the registry cannot be reached: the worker waits for it.
    moto.outage(true);
    produce("v2", 10, 10);
    w.next_matching(|e| matches!(e, WorkerEvent::Registry(RegistryEvent::Waiting { .. })).then_some(())).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(h.catalog.dead_letters("events/read_clicks").unwrap().is_empty(), "held, not dead-lettered");
    moto.outage(false);
    w.commits_until(10).await;

    // A writer schema the declared one cannot read: its values are dead letters that say why.
    produce("other", 20, 4);
    w.commits_until(4).await;
    w.stop().await;
    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    assert_eq!(dead.iter().map(|d| d.offset).collect::<Vec<_>>(), vec![20, 21, 22, 23]);
    assert!(dead[0].error.contains("cannot be read as the declared schema"), "{}", dead[0].error);
    assert!(dead[0].error.starts_with("schema version "), "{}", dead[0].error);

    let rows = parquet_rows(&h.committed_files());
    assert_eq!(rows.len(), 20, "each value once");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["id"], json!(i));
        assert_eq!(row["url"], json!(format!("/p/{i}")));
        let referrer = if i < 10 { Value::Null } else { json!(format!("r{i}")) };
        assert_eq!(row["referrer"], referrer, "v1 values take the declared default");
    }
    let versions: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["_schema_id"].as_str().unwrap()).collect();
    assert_eq!(versions.len(), 2, "two schema versions, as UUIDs: {versions:?}");
    assert!(versions.iter().all(|v| weir::formats::registry::parse_uuid(v).is_some()));
}

/// JSON Schema values through Glue, half of them compressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_registry_json() {
    let h = Harness::new(1);
    let moto = common::s3::S3::start("unused");
    glue_produce(&moto, h.broker.bootstrap_servers(), "json", "v1", 0, 10);
    let registry = moto.glue(&moto.direct);
    let declared =
        r#"{"type":"object","properties":{"id":{"type":"integer"},"url":{"type":"string"}},"required":["id"]}"#;
    let format = Format::parse(DataFormat::Json, declared, None).unwrap();
    let client = RegistryClient::new(&registry).unwrap();
    cross_check_topic(&format, &KeyFormat::Bytes, SubjectStrategy::default(), &client, "clicks").unwrap();
    let connection = KafkaConnection { schema_registry: Some(registry), ..h.connection() };
    let src_cfg = json!({"kafka.messages_rollover": 10, "kafka.time_rollover_seconds": 1});
    let publisher = publisher_with(connection, &h.runtime, "passthrough", "clicks", format, src_cfg, None);
    let mut w = h.start(publisher, WorkerOptions::default());
    w.commits_until(10).await;
    w.stop().await;
    assert!(h.catalog.dead_letters("events/read_clicks").unwrap().is_empty());
    let urls: Vec<Value> = parquet_rows(&h.committed_files()).iter().map(|r| r["url"].clone()).collect();
    assert_eq!(urls, (0..10).map(|i| json!(format!("/p/{i}"))).collect::<Vec<_>>());
}
