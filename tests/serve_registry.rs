//! `weir serve` with a connection that has a schema registry: registration
//! cross-checks the declared schema against the registry (each failure a 422
//! that says what is wrong), registry-framed Avro lands in the table, the
//! password never comes back, and `publisher status` says when the worker
//! waits for the registry. The same through an AWS Glue registry (moto).

mod common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir::embedded::registry::EmbeddedRegistry;
use weir::formats::registry::SchemaType;
use weir::formats::{DataFormat, Format, encode_json_values};

use common::serve::{Body, Server, broker};

const CLICKS_AVRO: &str = include_str!("../guest-examples/data/clicks.avsc");
const CLICKS_PROTO: &str = include_str!("../guest-examples/data/clicks.proto");

fn declaration(format: &str, schema: &str, extra: &str) -> String {
    format!(
        "name = \"read_clicks\"\nflush_interval_mins = 1\noutput_tables = [\"clicks\"]\n[source.kafka]\ntopic = \"clicks\"\ndata_format = \"{format}\"\n{extra}\nschema = {}\n[source.kafka.src_cfg]\n\"kafka.time_rollover_seconds\" = 1\n",
        serde_json::to_string(schema).unwrap()
    )
}

fn register(server: &Server, token: &str, collection: &str, declaration: &str, plugin: &str) -> (u16, Value) {
    let body = json!({ "declaration": declaration, "plugin": plugin });
    server.http("POST", &format!("/v1/collections/{collection}/publishers"), Some(token), Some(Body::Json(body)))
}

#[test]
fn registration_cross_checks_the_declared_schema_against_the_registry() {
    let broker = broker();
    let registry = EmbeddedRegistry::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({}));
    let create = |name: &str, url: &str| {
        let connection = json!({ "bootstrap_servers": broker.bootstrap_servers(), "schema_registry": { "url": url } });
        let (status, answer) = server.http(
            "POST",
            "/v1/collections",
            Some(&token),
            Some(Body::Json(json!({ "name": name, "connection": connection }))),
        );
        assert_eq!(status, 201, "{answer}");
    };
    create("events", &registry.url());
    create("offline", "http://127.0.0.1:1");
    // Two more registries, whose `clicks-value` holds a Protobuf and a JSON schema with `user_id` a string.
    let protos = EmbeddedRegistry::start().unwrap();
    let proto_writer = CLICKS_PROTO.replace("int64 user_id = 2;", "string user_id = 2;");
    protos.register("clicks-value", SchemaType::Protobuf, &proto_writer, vec![]).unwrap();
    create("protos", &protos.url());
    let jsons = EmbeddedRegistry::start().unwrap();
    let json_writer = common::stream::CLICKS_SCHEMA
        .replace(r#""user_id": { "type": "integer" }"#, r#""user_id": { "type": "string" }"#);
    assert_ne!(json_writer, common::stream::CLICKS_SCHEMA);
    jsons.register("clicks-value", SchemaType::Json, &json_writer, vec![]).unwrap();
    create("jsons", &jsons.url());
    let (_, plugin) = server.http("POST", "/v1/plugins", Some(&token), Some(Body::Bytes(common::guest("read_clicks"))));
    let plugin = plugin["sha256"].as_str().unwrap().to_string();

    // Before anything is registered, the subject is missing.
    let avro = declaration("avro", CLICKS_AVRO, "");
    let (status, answer) = register(&server, &token, "events", &avro, &plugin);
    assert_eq!(status, 422, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("has no subject `clicks-value`"), "{answer}");

    // The registry holds a schema whose `user_id` is a string: the declared long cannot read it.
    let mut writer: Value = serde_json::from_str(CLICKS_AVRO).unwrap();
    writer["fields"][1]["type"] = json!("string");
    registry.register("clicks-value", SchemaType::Avro, &writer.to_string(), vec![]).unwrap();
    registry.set_compatibility("clicks-value", "NONE");
    let cases = [
        ("events", avro.clone(), "field `user_id`: the writer's type is string, the declared type is long"),
        ("offline", avro.clone(), "the schema registry at http://127.0.0.1:1 cannot be reached"),
        (
            "events",
            declaration("avro", r#"{"type": "record", "name": "Click", "fields": [}"#, ""),
            "the schema is not a usable Avro schema: is not valid JSON",
        ),
        (
            "events",
            declaration("avro", r#"{"type":"record","name":"R","fields":[{"name":"v","type":["string","long"]}]}"#, ""),
            "field `v` is a union of [string, long]",
        ),
        (
            "events",
            declaration("protobuf", CLICKS_PROTO, "message = \"weir.examples.Tap\""),
            "defines no message `weir.examples.Tap`; it defines: weir.examples.Click",
        ),
        ("events", declaration("protobuf", "syntax = \"proto3\"; message { }", "message = \"A\""), "does not compile"),
        ("events", declaration("protobuf", CLICKS_PROTO, ""), "needs `message`"),
        (
            "protos",
            declaration("protobuf", CLICKS_PROTO, "message = \"weir.examples.Click\""),
            "field `user_id` (number 2): the writer's type is string, the declared type is int64",
        ),
        (
            "jsons",
            declaration("json", common::stream::CLICKS_SCHEMA, ""),
            "property `user_id`: the writer's type is string, the declared type is integer",
        ),
        (
            "jsons",
            declaration("avro", CLICKS_AVRO, ""),
            "it is a JSON schema, but the publisher declares data_format = \"avro\"",
        ),
    ];
    for (collection, declaration, expected) in cases {
        let (status, answer) = register(&server, &token, collection, &declaration, &plugin);
        assert_eq!(status, 422, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(expected), "{error}\nexpected: {expected}");
    }

    // The declared schema itself registered as version 2: the cross-check passes and says against what.
    let id = registry.register("clicks-value", SchemaType::Avro, CLICKS_AVRO, vec![]).unwrap();
    let (status, answer) = register(&server, &token, "events", &avro, &plugin);
    assert_eq!(status, 201, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "schema cross-checked against the registry (subject clicks-value, version 2, schema id {id})"
        )),
        "{message}"
    );
}

#[test]
fn registry_framed_avro_through_the_cli_with_a_password_that_never_comes_back() {
    let broker = broker();
    let mut registry = EmbeddedRegistry::start_with_credentials("svc", "registry-secret").unwrap();
    let id = registry.register("clicks-value", SchemaType::Avro, CLICKS_AVRO, vec![]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({}));
    server.cli_ok(
        &token,
        &[
            "collection",
            "create",
            "events",
            "--bootstrap-servers",
            broker.bootstrap_servers(),
            "--schema-registry-url",
            &registry.url(),
            "--schema-registry-username",
            "svc",
            "--schema-registry-password",
            "registry-secret",
        ],
    );
    let shown = server.cli_ok(&token, &["collection", "show", "events", "--output", "json"]);
    assert!(shown.contains(&registry.url()) && !shown.contains("registry-secret"), "{shown}");

    std::fs::write(dir.path().join("clicks.avsc"), CLICKS_AVRO).unwrap();
    let text = declaration("avro", "", "").replace("schema = \"\"", "schema = \"clicks.avsc\"");
    std::fs::write(dir.path().join("read_clicks.toml"), text).unwrap();
    let plugin = common::guest_path("read-clicks");
    let out = server.cli_ok(
        &token,
        &[
            "publisher",
            "register",
            "events",
            dir.path().join("read_clicks.toml").to_str().unwrap(),
            "--plugin",
            plugin.to_str().unwrap(),
        ],
    );
    assert!(out.contains("schema cross-checked against the registry (subject clicks-value, version 1"), "{out}");

    let format = Format::parse(DataFormat::Avro, CLICKS_AVRO, None).unwrap();
    let produce = |from: usize, n: usize| {
        let values: Vec<String> = common::stream::clicks(from, n);
        let encoded = encode_json_values(&format, &values, Some(id)).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(common::stream::produce_bytes(broker.bootstrap_servers(), "clicks", &encoded));
    };
    produce(0, 50);
    server.wait_for_rows(&token, "events", "clicks", 50);
    let status = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
    assert_eq!(status["data_format"], "avro");
    assert_eq!(status["schema_registry"]["subject"], "clicks-value");
    assert_eq!(status["schema_registry"]["schema_ids"], json!([{"id": id, "usable": true}]));
    let printed = server.cli_ok(&token, &["publisher", "status", "events/read_clicks"]);
    assert!(printed.contains("subject clicks-value") && printed.contains(&format!("schema ids     {id}")), "{printed}");

    // A new writer schema while the registry is away: status says the worker waits; nothing is lost.
    let mut v2: Value = serde_json::from_str(CLICKS_AVRO).unwrap();
    v2["fields"].as_array_mut().unwrap().push(json!({"name": "campaign", "type": ["null", "string"], "default": null}));
    let v2_id = registry.register("clicks-value", SchemaType::Avro, &v2.to_string(), vec![]).unwrap();
    let v2_format = Format::parse(DataFormat::Avro, &v2.to_string(), None).unwrap();
    registry.stop();
    let values = common::stream::clicks(50, 30);
    let encoded = encode_json_values(&v2_format, &values, Some(v2_id)).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(common::stream::produce_bytes(broker.bootstrap_servers(), "clicks", &encoded));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
        if status["schema_registry"]["waiting"].is_string() {
            let printed = server.cli_ok(&token, &["publisher", "status", "events/read_clicks"]);
            assert!(printed.contains("waiting for the registry since"), "{printed}");
            break;
        }
        assert!(Instant::now() < deadline, "status never said it waits for the registry: {status}");
        std::thread::sleep(Duration::from_millis(300));
    }
    registry.resume().unwrap();
    server.wait_for_rows(&token, "events", "clicks", 80);
    let status = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
    assert!(status["schema_registry"]["waiting"].is_null(), "{status}");
    assert_eq!(status["last_batch"]["dead_letters"], 0, "{status}");
}

/// A Glue registry through the CLI: the CLI sends its own AWS credentials
/// (a server never lends its own), they never come back, registration
/// cross-checks against the schema named after the topic, and Glue-framed
/// values (some zlib-compressed) land in the table.
#[test]
fn glue_registry_through_the_cli_with_credentials_that_never_come_back() {
    let broker = broker();
    let moto = common::s3::S3::start("unused");
    let v1 = r#"{"type":"record","name":"Click","namespace":"weir.test","fields":[{"name":"id","type":"long"},{"name":"url","type":"string"}]}"#;
    common::peers::glue_produce(&moto, broker.bootstrap_servers(), "avro", "v1", 0, 20);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({}));

    let glue = json!({ "kind": "glue", "region": "us-east-1", "registry_name": "weir", "endpoint": moto.direct });
    let connection = json!({ "bootstrap_servers": broker.bootstrap_servers(), "schema_registry": glue });
    let body = json!({ "name": "lent", "connection": connection });
    let (status, answer) = server.http("POST", "/v1/collections", Some(&token), Some(Body::Json(body)));
    assert_eq!(status, 422, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("does not lend its own AWS credentials"), "{answer}");

    let aws =
        [("AWS_ACCESS_KEY_ID", "weir-tests".to_string()), ("AWS_SECRET_ACCESS_KEY", "glue-secret-key".to_string())];
    let args = [
        "collection",
        "create",
        "events",
        "--bootstrap-servers",
        broker.bootstrap_servers(),
        "--glue-registry",
        "weir",
        "--glue-region",
        "us-east-1",
        "--glue-endpoint",
        &moto.direct,
    ];
    let out = server.cli_env(&token, &args, &aws);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = server.cli_ok(&token, &["collection", "show", "events", "--output", "json"]);
    assert!(shown.contains("\"registry_name\": \"weir\"") && !shown.contains("glue-secret-key"), "{shown}");

    std::fs::write(dir.path().join("clicks.avsc"), v1).unwrap();
    let text = declaration("avro", "", "").replace("schema = \"\"", "schema = \"clicks.avsc\"");
    std::fs::write(dir.path().join("read_clicks.toml"), text).unwrap();
    let plugin = common::guest_path("passthrough");
    let declaration = dir.path().join("read_clicks.toml");
    let args = ["publisher", "register", "events", declaration.to_str().unwrap(), "--plugin", plugin.to_str().unwrap()];
    let out = server.cli_ok(&token, &args);
    assert!(
        out.contains("schema cross-checked against the registry (subject clicks-value, version 1, schema version "),
        "{out}"
    );
    server.wait_for_rows(&token, "events", "clicks", 20);
    let status = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
    let registry = &status["schema_registry"];
    assert!(registry["url"].as_str().unwrap().ends_with("(AWS Glue registry weir in us-east-1)"), "{status}");
    let ids = registry["schema_ids"].as_array().unwrap();
    assert_eq!(ids.len(), 1, "{status}");
    assert!(weir::formats::registry::parse_uuid(ids[0]["id"].as_str().unwrap()).is_some(), "{status}");
    assert_eq!(status["last_batch"]["dead_letters"], 0, "{status}");
}
