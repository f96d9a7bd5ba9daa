//! Avro, Protobuf and JSON topics through the whole stream worker, plain and
//! framed by a schema registry, on the embedded broker. The messages are made
//! by independent producers (Confluent's serializers and schema-registry
//! client, fastavro, protobuf: `tests/peers/formats.py`) and the committed
//! table is read back with pyarrow, every type and provenance column checked.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use weir::embedded::registry::EmbeddedRegistry;
use weir::formats::registry::value_subject;
use weir::formats::writers::RegistryEvent;
use weir::formats::{DataFormat, Format, protobuf};
use weir::publisher::source::{KafkaConnection, SchemaRegistry};
use weir::stream::{WorkerEvent, WorkerOptions};

use common::peers::{formats_py, test_file};
use common::stream::{Harness, RunningWorker, publisher_with};

const MESSAGES: usize = 240;

struct Case {
    format: DataFormat,
    schema: &'static str,
    message: Option<&'static str>,
    /// Columns whose committed form needs a word to compare (`uuid`, `json`).
    kinds: &'static str,
}

const AVRO: Case =
    Case { format: DataFormat::Avro, schema: "data/everything.avsc", message: None, kinds: r#"{"uid": "uuid"}"# };
const PROTOBUF: Case = Case {
    format: DataFormat::Protobuf,
    schema: "data/everything.proto",
    message: Some("weir.test.Everything"),
    kinds: r#"{"extra": "json"}"#,
};
const JSON: Case = Case { format: DataFormat::Json, schema: "data/everything.json", message: None, kinds: "{}" };

fn format_of(case: &Case) -> Format {
    let text = std::fs::read_to_string(test_file(case.schema)).unwrap();
    Format::parse(case.format, &text, case.message).unwrap()
}

/// `Geo` and `Item`, as a file of their own for the writer's side.
const GEO_PROTO: &str = "syntax = \"proto3\";\npackage weir.test;\nmessage Geo {\n  double lat = 1;\n  double lon = 2;\n}\n\nmessage Item {\n  string sku = 1;\n  int32 qty = 2;\n}\n";

/// A FileDescriptorSet of the case's .proto, for the Python producer's message
/// classes. `split`: `Geo` and `Item` in a file of their own that the main file
/// imports, which Confluent's serializer registers as a schema reference.
fn descriptor_set(case: &Case, dir: &Path, split: bool) -> PathBuf {
    let mut text = std::fs::read_to_string(test_file(case.schema)).unwrap();
    let mut files = HashMap::new();
    if split {
        let moved = GEO_PROTO.split_once("package weir.test;\n").unwrap().1;
        assert!(text.contains(moved), "everything.proto defines Geo and Item as GEO_PROTO does");
        text = text
            .replace(moved, "")
            .replace("package weir.test;\n", "package weir.test;\n\nimport \"weir/geo.proto\";\n");
        files.insert("weir/geo.proto".to_string(), protobuf::ProtoFile::Source(GEO_PROTO.into()));
    }
    files.insert("everything.proto".to_string(), protobuf::ProtoFile::Source(text));
    let pool = protobuf::compile("everything.proto", files).unwrap();
    let path = dir.join("everything.desc");
    std::fs::write(&path, pool.encode_to_vec()).unwrap();
    path
}

fn registry_connection(h: &Harness, registry: &EmbeddedRegistry) -> KafkaConnection {
    KafkaConnection {
        schema_registry: Some(SchemaRegistry { url: registry.url(), ..SchemaRegistry::default() }),
        ..h.connection()
    }
}

/// `formats.py produce` arguments for `case` (the Avro writer schema may differ from the declared one).
fn produce_args(h: &Harness, case: &Case, registry: Option<&EmbeddedRegistry>, expected: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "produce",
        "--format",
        case.format.as_str(),
        "--bootstrap",
        h.broker.bootstrap_servers(),
        "--topic",
        "clicks",
        "--schema",
        test_file(case.schema).to_str().unwrap(),
        "--expected",
        expected.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    if let Some(r) = registry {
        args.extend(["--registry".into(), r.url()]);
    }
    if let Some(message) = case.message {
        // Registry-framed, the writer's schema references another subject's (weir fetches it too).
        let set = descriptor_set(case, h.dir.path(), registry.is_some());
        args.extend(["--descriptor-set".into(), set.display().to_string(), "--message".into(), message.into()]);
    }
    args
}

fn verify(h: &Harness, case: &Case, expected: &[&Path], schema_ids: Option<Vec<u32>>, allow_missing: bool) -> String {
    let mut args: Vec<String> = vec!["verify".into(), "--kinds".into(), case.kinds.into()];
    for e in expected {
        args.extend(["--expected".into(), e.display().to_string()]);
    }
    if let Some(ids) = schema_ids {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        args.extend(["--schema-ids".into(), ids.join(",")]);
    }
    if allow_missing {
        args.push("--allow-missing".into());
    }
    args.extend(h.committed_files().iter().map(|f| f.display().to_string()));
    formats_py(&args)
}

fn start(h: &Harness, case: &Case, connection: KafkaConnection) -> RunningWorker {
    let src_cfg = json!({"kafka.messages_rollover": 100, "kafka.time_rollover_seconds": 1});
    let publisher = publisher_with(connection, &h.runtime, "read-clicks", "clicks", format_of(case), src_cfg, None);
    h.start(publisher, WorkerOptions::default())
}

async fn round_trip(case: Case, framed: bool) {
    let h = Harness::new(3);
    let registry = framed.then(|| EmbeddedRegistry::start().unwrap());
    let expected = h.dir.path().join("expected.json");
    let mut args = produce_args(&h, &case, registry.as_ref(), &expected);
    args.extend(["--count".into(), MESSAGES.to_string()]);
    if case.format == DataFormat::Avro {
        args.extend(["--declared".into(), test_file(case.schema).display().to_string()]);
    }
    formats_py(&args);

    let connection = match &registry {
        Some(r) => registry_connection(&h, r),
        None => h.connection(),
    };
    let mut w = start(&h, &case, connection);
    let executions = w.commits_until(MESSAGES as u64).await;
    w.stop().await;
    let dead: u64 = executions.iter().map(|e| e.dead_letters).sum();
    let dead_letters = h.catalog.dead_letters("events/read_clicks").unwrap();
    assert_eq!(dead, 0, "no message is a dead letter: {:?}", dead_letters.first().map(|d| &d.error));
    let ids = registry.as_ref().map(|r| r.ids(&value_subject("clicks")));
    if framed && case.format == DataFormat::Protobuf {
        assert_eq!(
            registry.as_ref().unwrap().ids("weir/geo.proto").len(),
            1,
            "the serializer registered the reference"
        );
    }
    let report = verify(&h, &case, &[&expected], ids, false);
    println!("{report}");
    assert!(report.contains(&format!("\"rows\": {MESSAGES}")), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_every_type_round_trips() {
    round_trip(AVRO, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_registry_framed_every_type_round_trips() {
    round_trip(AVRO, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_every_type_round_trips() {
    round_trip(PROTOBUF, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_registry_framed_every_type_round_trips() {
    round_trip(PROTOBUF, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_every_type_round_trips() {
    round_trip(JSON, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_registry_framed_every_type_round_trips() {
    round_trip(JSON, true).await;
}

/// v1, then v2 (a field added with a default, a field the declared schema
/// defaults removed), then an incompatible v3, then v1 again: every v1 and v2
/// message lands in the declared columns, every v3 one is a dead letter that
/// says why, and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_schema_evolution_in_registry_mode() {
    let h = Harness::new(3);
    let registry = EmbeddedRegistry::start().unwrap();
    let declared = test_file(AVRO.schema);
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&declared).unwrap()).unwrap();
    let fields = doc["fields"].as_array_mut().unwrap();
    fields.retain(|f| f["name"] != "nickname");
    fields.push(json!({"name": "extra", "type": "string", "default": ""}));
    let v2 = h.dir.path().join("v2.avsc");
    std::fs::write(&v2, doc.to_string()).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&declared).unwrap()).unwrap();
    for f in doc["fields"].as_array_mut().unwrap() {
        if f["name"] == "name" {
            f["type"] = json!("long");
        }
    }
    let v3 = h.dir.path().join("v3.avsc");
    std::fs::write(&v3, doc.to_string()).unwrap();

    let mut w = start(&h, &AVRO, registry_connection(&h, &registry));
    let waves: [(&Path, Option<&str>, usize, usize); 4] = [
        (&declared, None, 0, 90),
        (&v2, Some("drop-nickname-add-extra"), 90, 90),
        (&v3, Some("name-as-long"), 180, 20),
        (&declared, None, 200, 60),
    ];
    let mut expected = Vec::new();
    for (i, (schema, mutate, start, count)) in waves.iter().enumerate() {
        let out = h.dir.path().join(format!("expected-{i}.json"));
        let mut args = produce_args(&h, &AVRO, Some(&registry), &out);
        let at = args.iter().position(|a| a == "--schema").unwrap() + 1;
        args[at] = schema.display().to_string();
        args.extend(["--declared".into(), declared.display().to_string()]);
        args.extend(["--start".into(), start.to_string(), "--count".into(), count.to_string()]);
        if let Some(m) = mutate {
            args.extend(["--mutate".into(), m.to_string()]);
        }
        if i == 2 {
            // v3 cannot read v2's data: a registry that checks BACKWARD would refuse it.
            args.extend(["--compatibility".into(), "NONE".into()]);
        }
        formats_py(&args);
        if i != 2 {
            expected.push(out);
        }
    }
    w.commits_until(260).await;
    w.stop().await;

    let ids = registry.ids(&value_subject("clicks"));
    assert_eq!(ids.len(), 3, "v1, v2 and v3 are registered");
    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    assert_eq!(dead.len(), 20, "every v3 message is a dead letter");
    for d in &dead {
        assert_eq!(
            d.error,
            format!(
                "schema id {} cannot be read as the declared schema: field `name`: the writer's type is long, the declared type is string",
                ids[2]
            )
        );
    }
    let expected: Vec<&Path> = expected.iter().map(PathBuf::as_path).collect();
    let report = verify(&h, &AVRO, &expected, Some(vec![ids[0], ids[1]]), false);
    assert!(report.contains("\"rows\": 240"), "{report}");
}

/// The registry is down when the worker meets schema ids it has not fetched:
/// it waits, commits nothing and dead-letters nothing, and once the registry
/// is back every message lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_outage_holds_messages_and_loses_none() {
    let h = Harness::new(3);
    let mut registry = EmbeddedRegistry::start().unwrap();
    let expected = h.dir.path().join("expected.json");
    let mut args = produce_args(&h, &AVRO, Some(&registry), &expected);
    args.extend(["--count".into(), "150".into(), "--declared".into(), test_file(AVRO.schema).display().to_string()]);
    formats_py(&args);
    registry.stop();

    let mut w = start(&h, &AVRO, registry_connection(&h, &registry));
    let error = w
        .next_matching(|e| match e {
            WorkerEvent::Registry(RegistryEvent::Waiting { error }) => Some(error.clone()),
            WorkerEvent::Committed(e) => panic!("committed while the registry was down: {e:?}"),
            _ => None,
        })
        .await;
    assert!(error.contains("cannot be reached"), "{error}");
    // Waiting, not failing: nothing is committed while the registry is away.
    let early = tokio::time::timeout(Duration::from_secs(3), w.next_commit()).await;
    assert!(early.is_err(), "a batch was committed while the registry was down");
    registry.resume().unwrap();
    let executions = w.commits_until(150).await;
    w.stop().await;
    assert_eq!(executions.iter().map(|e| e.dead_letters).sum::<u64>(), 0, "an outage makes no dead letters");
    let report = verify(&h, &AVRO, &[&expected], Some(registry.ids(&value_subject("clicks"))), false);
    assert!(report.contains("\"rows\": 150"), "{report}");
}

/// A frame that is not one (no magic byte, cut short, an id the registry
/// lacks, a body that is not the record) is a dead letter that says which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_are_dead_letters_with_their_reason() {
    let h = Harness::new(1);
    let registry = EmbeddedRegistry::start().unwrap();
    let format = format_of(&AVRO);
    let Format::Avro(declared) = &format else { unreachable!() };
    let id = registry
        .register(&value_subject("clicks"), weir::formats::registry::SchemaType::Avro, &declared.text, vec![])
        .unwrap();
    let empty_body = weir::formats::confluent::frame(id, None, &[]);
    let values: Vec<Vec<u8>> =
        vec![b"{\"id\": 1}".to_vec(), vec![0, 0, 0], weir::formats::confluent::frame(4242, None, b"\x02"), empty_body];
    common::stream::produce_bytes(h.broker.bootstrap_servers(), "clicks", &values).await;
    let mut w = start(&h, &AVRO, registry_connection(&h, &registry));
    w.commits_until(4).await;
    w.stop().await;
    let errors: Vec<String> =
        h.catalog.dead_letters("events/read_clicks").unwrap().into_iter().map(|d| d.error).collect();
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(errors[0].contains("starts with byte 0x7b, not the schema registry's magic byte 0"), "{}", errors[0]);
    assert!(errors[1].contains("3 bytes long, shorter than the schema registry's 5-byte header"), "{}", errors[1]);
    assert!(errors[2].contains("schema id 4242 is not in the schema registry"), "{}", errors[2]);
    assert!(errors[3].contains("not a complete, valid Avro record of its writer schema"), "{}", errors[3]);
}

/// The embedded registry answers Confluent's own client as Confluent's registry does.
#[test]
fn the_embedded_registry_answers_confluents_client() {
    let registry = EmbeddedRegistry::start().unwrap();
    assert_eq!(formats_py(&["client-checks", "--registry", &registry.url()]).trim(), "ok");
}
