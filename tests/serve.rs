//! `weir serve` as its own process on a loopback port, driven through its
//! HTTP API and the `weir` CLI, reading an embedded broker: the seed's whole
//! conversation, every registration failure, uploads, tenants, restarts.

mod common;

use std::path::Path;

use serde_json::{Value, json};

use common::block_on;
use common::peers::delta_py;
use common::serve::{ADMIN, Body, QUICK, Server, broker, declaration, event_ids, plugin_path, poll, registered};
use common::stream::{clicks, produce};

#[test]
fn the_seed_scenario_through_the_cli() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let bootstrap = broker.bootstrap_servers();

    let tenant = server.cli_json(ADMIN, &["tenant", "create", "acme"]);
    let token = tenant["token"].as_str().unwrap().to_string();
    assert!(server.cli_ok(ADMIN, &["tenant", "list"]).contains("acme"));

    let out = server.cli_ok(&token, &["collection", "create", "events", "--bootstrap-servers", bootstrap]);
    assert!(out.contains("collection   events (group sources)"), "{out}");
    assert!(out.contains(&format!("kafka-topic-in {bootstrap}")), "{out}");
    let out = server.cli_ok(&token, &["connection", "check", "events", "--topic", "clicks"]);
    assert!(out.contains("connection check passed and the topic exists (1 brokers)"), "{out}");

    let decl = declaration(dir.path(), QUICK);
    let out =
        server.cli_ok(&token, &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", &plugin_path()]);
    assert!(
        out.contains("connection check passed and the topic exists; publisher events/read_clicks registered, writing table events/clicks"),
        "{out}"
    );

    let mut messages = clicks(0, 250);
    messages.extend(["{\"event_id\": \"broken\"".to_string(), "[]".to_string(), "not json".to_string()]);
    block_on(produce(bootstrap, "clicks", &messages));
    server.wait_for_rows(&token, "events", "clicks", 250);

    // The sample shows the rows.
    let out = server.cli_ok(&token, &["table", "sample", "events/clicks", "--limit", "5"]);
    assert!(out.contains("events/clicks version") && out.contains("EVENT_ID") && out.contains("evt-"), "{out}");
    let sample = server.cli_json(&token, &["table", "sample", "events/clicks", "--limit", "5"]);
    assert_eq!(sample["rows"].as_array().unwrap().len(), 5, "{sample}");
    assert!(sample["rows"][0]["event_id"].as_str().unwrap().starts_with("evt-"));

    // Status shows what the seed shows, and lag drains to zero (dead letters count as handled).
    let status = poll("lag 0", || {
        let s = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
        (s["lag"] == json!(0)).then_some(s)
    });
    assert_eq!(status["worker"]["state"], "consuming", "{status}");
    let out = server.cli_ok(&token, &["publisher", "status", "events/read_clicks"]);
    for expected in [
        "topic          clicks (json)",
        "output table   events/clicks",
        "flush ceiling  300 s (flush_interval_mins = 5)",
        "time window    2 s",
        "worker         consuming (partitions 0, 1, 2)",
        "lag            0 messages",
        "last batch     #",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in\n{out}");
    }

    // Executions, with the plugin's log; dead letters are counted.
    let executions = server.cli_json(&token, &["execution", "list", "events/read_clicks"]);
    let executions = executions.as_array().unwrap();
    let dead: u64 = executions.iter().map(|e| e["dead_letters"].as_u64().unwrap()).sum();
    assert_eq!(dead, 3, "{executions:?}");
    let id = executions[0]["id"].as_i64().unwrap().to_string();
    let shown = server.cli_json(&token, &["execution", "show", &id]);
    assert_eq!(shown["publisher"], "events/read_clicks");
    assert!(shown["plugin_log"]["lines"].is_array(), "{shown}");
    let out = server.cli_ok(&token, &["execution", "show", &id]);
    assert!(out.contains("plugin log") && out.contains("timings (ms)"), "{out}");

    // Tables: list, schema, versions, export.
    let tables = server.cli_json(&token, &["table", "list", "events"]);
    assert_eq!(tables[0]["name"], "clicks");
    assert_eq!(tables[0]["rows"], 250);
    let out = server.cli_ok(&token, &["table", "schema", "events/clicks"]);
    assert!(out.contains("event_id") && out.contains("_partition"), "{out}");
    let versions = server.cli_json(&token, &["table", "versions", "events/clicks"]);
    let first = versions[0]["version"].as_i64().unwrap().to_string();
    let export = dir.path().join("clicks.parquet");
    server.cli_ok(&token, &["table", "export", "events/clicks", "-o", export.to_str().unwrap()]);
    let mut ids = event_ids(&export);
    ids.sort();
    let mut expected: Vec<String> = (0..250).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected);
    let old = dir.path().join("v1.parquet");
    server.cli_ok(&token, &["table", "export", "events/clicks", "--version", &first, "-o", old.to_str().unwrap()]);
    assert_eq!(event_ids(&old).len() as u64, versions[0]["rows"].as_u64().unwrap());

    // The files a version reads, with their sizes and rows; its rows a page at a
    // time, pages that start inside a file and pages that skip whole files
    // alike, the same rows in the same order as in one go.
    let (status, files) = server.http("GET", "/v1/collections/events/tables/clicks/files", Some(&token), None);
    assert_eq!(status, 200, "{files}");
    let listed = files["files"].as_array().unwrap();
    assert_eq!(listed.len() as u64, files["count"].as_u64().unwrap(), "{files}");
    assert_eq!(listed.iter().map(|f| f["rows"].as_u64().unwrap()).sum::<u64>(), 250, "{files}");
    assert_eq!(listed.iter().map(|f| f["size"].as_u64().unwrap()).sum::<u64>(), files["bytes"].as_u64().unwrap());
    assert!(listed.iter().all(|f| f["size"].as_u64().unwrap() > 0), "{files}");
    assert!(listed.iter().all(|f| f["path"].as_str().unwrap().ends_with(".parquet")), "{files}");
    let page = |offset: usize, limit: usize| {
        let path = format!("/v1/collections/events/tables/clicks/sample?offset={offset}&limit={limit}");
        let (status, page) = server.http("GET", &path, Some(&token), None);
        assert_eq!(status, 200, "{page}");
        page["rows"].as_array().unwrap().iter().map(|r| r["event_id"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let whole = page(0, 10_000);
    assert_eq!(whole.len(), 250);
    let paged: Vec<String> = (0..250).step_by(37).flat_map(|offset| page(offset, 37)).collect();
    assert_eq!(paged, whole, "pages of 37 rows make the whole table");
    assert!(page(250, 10).is_empty(), "a page past the end is empty");

    // The publishers list: lag, messages/s and rows committed a minute at a time.
    let listed = poll("the list's lag measured", || {
        let (_, list) = server.http("GET", "/v1/publishers", Some(&token), None);
        (list[0]["lag"] == json!(0)).then_some(list)
    });
    let activity = &listed[0]["activity"];
    let sum = |key: &str| activity[key].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("rows"), sum("messages")), (250, 253), "dead letters are messages taken in: {activity}");
    assert!(listed[0]["messages_per_s"].as_f64().unwrap() > 0.0, "{listed}");
    assert_eq!(listed[0]["last_batch"]["status"], "committed", "{listed}");

    // The table is a Delta table: `table show` says where, and DuckDB, Polars
    // and deltalake read every version as `table sample` shows it.
    let shown = server.cli_json(&token, &["table", "show", "events/clicks"]);
    assert_eq!((&shown["format"], &shown["rows"]), (&json!("delta"), &json!(250)), "{shown}");
    let location = shown["location"].as_str().unwrap();
    assert!(server.cli_ok(&token, &["table", "show", "events/clicks"]).contains("delta_scan("));
    let latest = shown["version"].as_i64().unwrap();
    assert_eq!(latest, versions.as_array().unwrap().len() as i64);
    let read = delta_py(&["read", location, "--key", "event_id"]);
    assert_eq!(read["latest"], latest);
    for v in 1..=latest {
        let sample = server
            .cli_json(&token, &["table", "sample", "events/clicks", "--version", &v.to_string(), "--limit", "10000"]);
        let mut ids: Vec<String> =
            sample["rows"].as_array().unwrap().iter().map(|r| r["event_id"].as_str().unwrap().to_string()).collect();
        ids.sort();
        for reader in ["duckdb", "polars", "deltalake"] {
            let seen = &read["versions"][v.to_string()][reader]["keys"];
            let seen: Vec<String> = seen.as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
            assert_eq!(seen, ids, "{reader} reads version {v} as weir does");
        }
    }

    assert_eq!(server.cli_json(&token, &["plugin", "list"]).as_array().unwrap().len(), 1);
    assert!(server.cli_ok(&token, &["publisher", "list"]).contains("read_clicks"));

    // Pause: the worker stops; resume: it continues where it stopped.
    server.cli_ok(&token, &["publisher", "pause", "events/read_clicks"]);
    let status = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
    assert_eq!(status["worker"]["state"], "paused");
    block_on(produce(bootstrap, "clicks", &clicks(250, 50)));
    let out = server.cli_ok(&token, &["publisher", "resume", "events/read_clicks"]);
    assert!(out.contains("consuming"), "{out}");
    server.wait_for_rows(&token, "events", "clicks", 300);

    // Health and metrics.
    let (status, health) = server.http("GET", "/health", None, None);
    assert_eq!((status, &health["status"]), (200, &json!("ok")));
    let metrics = server.text("/metrics", ADMIN);
    for name in [
        "weir_batches_closed_total",
        "weir_rows_committed_total",
        "weir_dead_letters_total",
        "weir_plugin_seconds_total",
        "weir_plugin_cpu_seconds_total",
        "weir_consumer_lag",
    ] {
        assert!(metrics.contains(name), "missing {name} in\n{metrics}");
    }
    let plugin_cpu: f64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                r#"weir_plugin_cpu_seconds_total{tenant="acme",collection="events",publisher="read_clicks"} "#,
            )
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no plugin CPU time for read_clicks in\n{metrics}"));
    assert!(plugin_cpu > 0.0, "the plugin's calls used no CPU time:\n{metrics}");
    assert!(
        metrics.contains(r#"weir_dead_letters_total{tenant="acme",collection="events",publisher="read_clicks"} 3"#),
        "{metrics}"
    );

    // Deleting: a collection with publishers is refused; then the publisher, then the collection.
    let out = server.cli(&token, &["collection", "delete", "events"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("collection `events` still has publishers: delete them first")
    );
    server.cli_ok(&token, &["publisher", "delete", "events/read_clicks"]);
    let out = server.cli(&token, &["publisher", "status", "events/read_clicks"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("publisher `events/read_clicks` does not exist"));
    server.cli_ok(&token, &["collection", "delete", "events"]);
    assert_eq!(server.cli_json(&token, &["collection", "list"]), json!([]));
}

#[test]
fn a_restarted_server_resumes_every_publisher_without_loss_or_duplicates() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let bootstrap = broker.bootstrap_servers();
    let server = Server::start(&data);
    let token = registered(&server, dir.path(), bootstrap);
    block_on(produce(bootstrap, "clicks", &clicks(0, 200)));
    server.wait_for_rows(&token, "events", "clicks", 200);

    // kill -9, more messages while it is down, then a restart.
    server.kill();
    block_on(produce(bootstrap, "clicks", &clicks(200, 200)));
    let server = Server::start(&data);
    server.wait_for_rows(&token, "events", "clicks", 400);

    // A graceful stop and another restart.
    server.stop();
    block_on(produce(bootstrap, "clicks", &clicks(400, 100)));
    let server = Server::start(&data);
    server.wait_for_rows(&token, "events", "clicks", 500);

    let export = dir.path().join("all.parquet");
    server.cli_ok(&token, &["table", "export", "events/clicks", "-o", export.to_str().unwrap()]);
    let mut ids = event_ids(&export);
    ids.sort();
    let mut expected: Vec<String> = (0..500).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "every message exactly once");
}

fn register(
    server: &Server,
    token: &str,
    collection: &str,
    declaration: &str,
    plugin: &str,
    update: bool,
) -> (u16, Value) {
    let body = json!({ "declaration": declaration, "plugin": plugin, "update": update });
    server.http("POST", &format!("/v1/collections/{collection}/publishers"), Some(token), Some(Body::Json(body)))
}

#[test]
fn every_registration_failure_is_a_4xx_that_says_what_to_do() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({ "max_publishers": 1 }));
    let bootstrap = broker.bootstrap_servers();
    let create = |name: &str, connection: Value| {
        let body = json!({ "name": name, "connection": connection });
        let (status, answer) = server.http("POST", "/v1/collections", Some(&token), Some(Body::Json(body)));
        assert_eq!(status, 201, "{answer}");
    };
    create("events", json!({ "bootstrap_servers": bootstrap }));
    create("bare", Value::Null);
    create("offline", json!({ "bootstrap_servers": "127.0.0.1:1" }));
    let (status, plugin) =
        server.http("POST", "/v1/plugins", Some(&token), Some(Body::Bytes(common::guest("read_clicks"))));
    assert_eq!(status, 201, "{plugin}");
    let plugin = plugin["sha256"].as_str().unwrap().to_string();

    let schema = serde_json::to_string(common::stream::CLICKS_SCHEMA).unwrap();
    let decl = |top: &str, kafka: &str| {
        format!("name = \"read_clicks\"\n{top}\n[source.kafka]\ntopic = \"clicks\"\ndata_format = \"json\"\n{kafka}\n")
    };
    let ok_top = "flush_interval_mins = 5\noutput_tables = [\"clicks\"]";
    let ok_kafka = format!("schema = {schema}");
    let good = decl(ok_top, &ok_kafka);

    let cases: Vec<(&str, String, String, u16, &str)> = vec![
        (
            "nowhere",
            good.clone(),
            plugin.clone(),
            404,
            "collection `nowhere` does not exist: create it with `weir collection create nowhere",
        ),
        (
            "bare",
            good.clone(),
            plugin.clone(),
            422,
            "collection `bare` has no kafka-topic-in connection: add one with `weir connection set bare",
        ),
        ("offline", good.clone(), plugin.clone(), 422, "cannot reach the Kafka brokers at 127.0.0.1:1"),
        (
            "events",
            good.replace("topic = \"clicks\"", "topic = \"nosuch\"").replace("[\"clicks\"]", "[\"nosuch\"]"),
            plugin.clone(),
            422,
            "topic `nosuch` does not exist on the brokers",
        ),
        ("events", decl(ok_top, ""), plugin.clone(), 422, "`schema` is required"),
        ("events", decl(ok_top, "schema = '{\"type\": 1}'"), plugin.clone(), 422, "the schema does not parse"),
        (
            "events",
            decl(ok_top, "schema = \"clicks.json\""),
            plugin.clone(),
            422,
            "must be given inline here, not as the path \"clicks.json\"",
        ),
        (
            "events",
            decl("flush_interval_mins = 0\noutput_tables = [\"clicks\"]", &ok_kafka),
            plugin.clone(),
            422,
            "flush_interval_mins must be a whole number of minutes, at least 1, not 0",
        ),
        (
            "events",
            decl("flush_interval_mins = 2.5\noutput_tables = [\"clicks\"]", &ok_kafka),
            plugin.clone(),
            422,
            "flush_interval_mins must be a whole number of minutes, at least 1, not 2.5",
        ),
        (
            "events",
            decl("flush_interval_mins = 5\noutput_tables = [\"events\"]", &ok_kafka),
            plugin.clone(),
            422,
            "output_tables must be exactly [\"clicks\"]",
        ),
        (
            "events",
            decl(ok_top, &format!("{ok_kafka}\n[source.kafka.src_cfg]\n\"kafka.colour\" = 1")),
            plugin.clone(),
            422,
            "kafka.colour",
        ),
        (
            "events",
            decl(ok_top, &format!("{ok_kafka}\n[source.kafka.src_cfg]\n\"kafka.size_rollover_mb\" = \"big\"")),
            plugin.clone(),
            422,
            "src_cfg `kafka.size_rollover_mb`",
        ),
        (
            "events",
            decl(&format!("{ok_top}\ntrigger = \"*/5 * * * *\""), &ok_kafka),
            plugin.clone(),
            422,
            "a stream publisher takes no trigger: the rollover is its trigger",
        ),
        (
            "events",
            good.clone(),
            format!("sha256:{}", "0".repeat(64)),
            404,
            "is not uploaded: push it first with `weir plugin push",
        ),
        (
            "events",
            decl(&format!("{ok_top}\npartition_by = [\"week(ts)\"]"), &ok_kafka),
            plugin.clone(),
            422,
            "partition_by entry \"week(ts)\": no transform `week`; write a column (`country`), or a transform of one",
        ),
        // Checked against the columns the plugin writes (it is called with a batch of no rows).
        (
            "events",
            decl(&format!("{ok_top}\npartition_by = [\"region\"]"), &ok_kafka),
            plugin.clone(),
            422,
            "partition_by entry `region`: the table has no column `region` (its columns: event_id, user_id, url",
        ),
        (
            "events",
            decl(&format!("{ok_top}\npartition_by = [\"hour(user_id)\"]"), &ok_kafka),
            plugin.clone(),
            422,
            "partition_by entry `hour(user_id)`: column `user_id` is Int64, and it takes a timestamp",
        ),
    ];
    for (collection, declaration, plugin, status, message) in cases {
        let (got, answer) = register(&server, &token, collection, &declaration, &plugin, false);
        let error = answer["error"].as_str().unwrap_or_default();
        assert_eq!(got, status, "{collection}: {error}\n{declaration}");
        assert!(error.contains(message), "{collection}: expected {message:?} in {error:?}");
    }
    assert_eq!(server.http("GET", "/v1/publishers", Some(&token), None).1, json!([]), "nothing registered");

    // The good one registers; again is a conflict unless it is an update; a second one is over the quota.
    let (status, answer) = register(&server, &token, "events", &good, &plugin, false);
    assert_eq!(status, 201, "{answer}");
    assert!(answer["message"].as_str().unwrap().starts_with("connection check passed and the topic exists"));
    let (status, answer) = register(&server, &token, "events", &good, &plugin, false);
    assert_eq!(status, 409);
    assert!(answer["error"].as_str().unwrap().contains("publisher `events/read_clicks` already exists: pass --update"));
    // An update swaps the plugin and the rollover; the new plugin's log shows in its executions.
    let (status, enrich) =
        server.http("POST", "/v1/plugins", Some(&token), Some(Body::Bytes(common::guest("clicks-enrich"))));
    assert_eq!(status, 201, "{enrich}");
    let every_ten = format!("{good}\n[source.kafka.src_cfg]\n\"kafka.messages_rollover\" = 10\n");
    let (status, answer) = register(&server, &token, "events", &every_ten, enrich["sha256"].as_str().unwrap(), true);
    assert_eq!(status, 200, "{answer}");
    // Clicks of 100 ms and more: not bounces, so the table gets rows.
    block_on(produce(bootstrap, "clicks", &clicks(100, 10)));
    let id = poll("an execution", || {
        let list = server.cli_json(&token, &["execution", "list", "events/read_clicks"]);
        list.as_array().unwrap().iter().find(|e| e["status"] == "committed").map(|e| e["id"].to_string())
    });
    let out = server.cli_ok(&token, &["execution", "show", &id]);
    assert!(out.contains("plugin log:") && out.contains("info  log    kept ") && out.contains("of 10 clicks"), "{out}");
    // The table has data now: its partitioning does not change.
    let partitioned = every_ten.replace(ok_top, &format!("{ok_top}\npartition_by = [\"country\"]"));
    let (status, answer) = register(&server, &token, "events", &partitioned, &plugin, true);
    assert_eq!(status, 422, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("table `events/clicks` is not partitioned and has data, and a table's partitioning does not change: remove partition_by, or write a new table"),
        "{error}"
    );
    let other = good.replace("name = \"read_clicks\"", "name = \"other\"");
    let (status, answer) = register(&server, &token, "events", &other, &plugin, false);
    assert_eq!(status, 403);
    assert!(answer["error"].as_str().unwrap().contains("already has 1 publishers, its quota"), "{answer}");

    // The CLI exits non-zero with the server's message.
    let decl_path = declaration(dir.path(), "\"kafka.messages_rollover\" = 0");
    let out = server.cli(
        &token,
        &["publisher", "register", "events", decl_path.to_str().unwrap(), "--plugin", &plugin_path(), "--update"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("must be a whole number greater than zero, not 0") && stderr.contains("(HTTP 422)"),
        "{stderr}"
    );
}

#[test]
fn uploads_are_checked_and_nothing_bad_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data);
    let token = server.tenant("acme", json!({ "max_module_bytes": 1 << 20 }));
    let roomy = server.tenant("roomy", json!({}));
    let upload =
        |token: &str, bytes: Vec<u8>| server.http("POST", "/v1/plugins", Some(token), Some(Body::Bytes(bytes)));

    let core = wat::parse_str(r#"(module (func (export "publish")))"#).unwrap();
    let wrong_world = wat::parse_str("(component)").unwrap();
    let forbidden = wat::parse_str(r#"(component (import "evil:net/exfiltrate@1.0.0" (instance)))"#).unwrap();
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"definitely not wasm".to_vec(), 422, "not a WebAssembly component"),
        (common::guest("read_clicks"), 413, "over tenant `acme`'s 1 MiB module size limit"),
        (core, 422, "is a core WebAssembly module, not a component"),
        (wrong_world, 422, "does not implement the `weir:publisher/stream-publisher` world, version 0.2.x or 0.1.0"),
        (forbidden, 422, "imports `evil:net/exfiltrate@1.0.0`, which publishers may not use"),
    ];
    for (bytes, status, message) in cases {
        let (got, answer) = upload(&token, bytes);
        assert_eq!(got, status, "{answer}");
        assert!(answer["error"].as_str().unwrap().contains(message), "expected {message:?} in {answer}");
    }
    assert_eq!(server.http("GET", "/v1/plugins", Some(&token), None).1, json!([]));
    let stored = |dir: &Path| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(stored(&data.join("modules")), 0, "nothing stored");

    // The same bytes twice are one module; another tenant's upload of them is its own entry, one file.
    let module = common::guest("read_clicks");
    let (status, first) = upload(&roomy, module.clone());
    assert_eq!((status, &first["new"]), (201, &json!(true)), "{first}");
    let (status, again) = upload(&roomy, module.clone());
    assert_eq!((status, &again["new"], &again["sha256"]), (200, &json!(false), &first["sha256"]));
    assert_eq!(server.http("GET", "/v1/plugins", Some(&roomy), None).1.as_array().unwrap().len(), 1);
    assert_eq!(stored(&data.join("modules")), 1);
    let out = server.cli_ok(&roomy, &["plugin", "push", &plugin_path()]);
    assert!(out.contains("already uploaded"), "{out}");
}

#[test]
fn a_batch_being_retried_shows_in_status_executions_and_metrics_from_its_first_failure() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let bootstrap = broker.bootstrap_servers();
    // A plugin that spins, under a half-second CPU deadline: every attempt traps.
    let token = server.tenant("acme", json!({ "deadline_ms": 500 }));
    server.cli_ok(&token, &["collection", "create", "events", "--bootstrap-servers", bootstrap]);
    let decl = declaration(dir.path(), QUICK);
    let spin = common::guest_path("hostile-infinite-loop").display().to_string();
    server.cli_ok(&token, &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", &spin]);
    block_on(produce(bootstrap, "clicks", &clicks(0, 3)));

    let status = poll("the first failed attempt in the status", || {
        let s = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
        (!s["retrying"].is_null()).then_some(s)
    });
    let retrying = &status["retrying"];
    assert_eq!((&retrying["attempt"], &retrying["of"]), (&json!(1), &json!(5)), "{status}");
    let error = retrying["error"].as_str().unwrap();
    assert!(error.starts_with("the plugin exceeded its 500 ms CPU deadline and was stopped"), "{status}");
    assert!(retrying["next_attempt_at_ms"].as_i64().unwrap() > retrying["failing_since_ms"].as_i64().unwrap());
    let out = server.cli_ok(&token, &["publisher", "status", "events/read_clicks"]);
    assert!(
        out.contains("retrying       a batch: attempt 1 of 5 failed: the plugin exceeded its 500 ms CPU deadline"),
        "{out}"
    );
    // The attempt is an execution already, with its error, before the batch ends.
    let executions = server.cli_json(&token, &["execution", "list", "events/read_clicks"]);
    let first = &executions[0];
    assert_eq!(first["status"], "retrying", "{executions}");
    assert!(first["error"].as_str().unwrap().contains("CPU deadline"), "{executions}");
    let metrics = server.text("/metrics", ADMIN);
    let retrying_gauge = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"weir_batch_retrying{tenant="acme",collection="events",publisher="read_clicks"} "#)
        })
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or_else(|| panic!("no weir_batch_retrying for read_clicks in\n{metrics}"));
    assert!(retrying_gauge >= 1, "{metrics}");
    // The 3 messages are read, never committed: the node's lag says so, from what its
    // consumer last fetched (the server refreshes it every second here).
    poll("the lag of the batch that cannot commit", || {
        let metrics = server.text("/metrics", ADMIN);
        let lag = common::many::series(&metrics, "weir_consumer_lag", &[("publisher", "read_clicks")]);
        (lag.iter().map(|(_, n)| n).sum::<f64>() == 3.0).then_some(())
    });
    // The error says how to give it more; the tenant's quota changed, the publisher runs under it.
    assert!(error.contains("`weir tenant quotas TENANT --deadline 30s`") && !error.contains("backtrace"), "{error}");
    let changed = server.cli_ok(ADMIN, &["tenant", "quotas", "acme", "--deadline", "700ms"]);
    assert!(changed.contains("acme") && changed.contains("700 ms") && changed.contains("256 MiB"), "{changed}");
    poll("an attempt under the new deadline", || {
        let executions = server.cli_json(&token, &["execution", "list", "events/read_clicks"]);
        let errors: Vec<&str> = executions.as_array().unwrap().iter().filter_map(|e| e["error"].as_str()).collect();
        errors.iter().any(|e| e.contains("exceeded its 700 ms CPU deadline")).then_some(())
    });
    let none = server.cli(ADMIN, &["tenant", "quotas", "acme"]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("give the quotas to change"), "{none:?}");
    server.cli_ok(&token, &["publisher", "delete", "events/read_clicks"]);
}

#[test]
fn python_and_typescript_publishers_are_pushed_to_a_server_and_run_there() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let bootstrap = broker.bootstrap_servers();
    let token = server.tenant("acme", json!({}));
    let components =
        [("python", common::python_guest("clicks-enrich")), ("typescript", common::js_guest("clicks-enrich"))];
    for (language, component) in &components {
        let collection = format!("events_{language}");
        let path = dir.path().join(format!("{language}.wasm"));
        std::fs::write(&path, component).unwrap();
        let out = server.cli_ok(&token, &["plugin", "push", path.to_str().unwrap()]);
        assert!(out.contains(" uploaded ("), "{out}");
        server.cli_ok(&token, &["collection", "create", &collection, "--bootstrap-servers", bootstrap]);
        let own = dir.path().join(language);
        std::fs::create_dir_all(&own).unwrap();
        let decl = declaration(&own, QUICK);
        server.cli_ok(
            &token,
            &["publisher", "register", &collection, decl.to_str().unwrap(), "--plugin", path.to_str().unwrap()],
        );
    }
    block_on(produce(bootstrap, "clicks", &clicks(0, 300)));
    // Clicks 0..99 last under 100 ms: bounces, dropped in either language.
    for (language, _) in &components {
        server.wait_for_rows(&token, &format!("events_{language}"), "clicks", 200);
    }
}

/// `weir serve --catalog postgres://…`: the same server on a PostgreSQL
/// catalog (a throwaway server): it commits there, not to SQLite, and after
/// a kill -9 resumes from there with every message once.
#[test]
fn a_server_on_a_postgresql_catalog_commits_there_and_resumes_from_it() {
    let postgres = common::postgres::Postgres::shared();
    let url = postgres.database("serve_catalog");
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let key = dir.path().join("weir.key");

    // Without a key file every node can share, it refuses to start, saying what to do.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", "127.0.0.1:0", "--catalog", &url, "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("--secret-key-file"), "{stderr}");

    std::fs::write(&key, "7f".repeat(32)).unwrap();
    let args = ["--catalog", url.as_str(), "--secret-key-file", key.to_str().unwrap()];
    let server = Server::start_with(&data, &args);
    let bootstrap = broker.bootstrap_servers();
    let token = registered(&server, dir.path(), bootstrap);
    block_on(produce(bootstrap, "clicks", &clicks(0, 200)));
    server.wait_for_rows(&token, "events", "clicks", 200);
    assert!(!data.join("catalog.db").exists(), "no SQLite catalog beside the PostgreSQL one");
    // Read independently, in PostgreSQL itself.
    let committed = |sql: &str| postgres.sql("serve_catalog", sql);
    assert_eq!(committed("SELECT SUM(next_offset) FROM source_offsets"), "200");
    assert_eq!(committed("SELECT name FROM publishers"), "read_clicks");

    server.kill();
    block_on(produce(bootstrap, "clicks", &clicks(200, 200)));
    let server = Server::start_with(&data, &args);
    server.wait_for_rows(&token, "events", "clicks", 400);
    assert_eq!(committed("SELECT SUM(next_offset) FROM source_offsets"), "400");
    let export = dir.path().join("all.parquet");
    server.cli_ok(&token, &["table", "export", "events/clicks", "-o", export.to_str().unwrap()]);
    let mut ids = event_ids(&export);
    ids.sort();
    let mut expected: Vec<String> = (0..400).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "every message exactly once");
}

#[test]
fn a_second_publisher_of_a_table_is_refused_naming_the_one_that_writes_it() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = registered(&server, dir.path(), broker.bootstrap_servers());
    // Another name, the same topic, the same collection: it would write every row a second time.
    let first = std::fs::read_to_string(dir.path().join("read_clicks.toml")).unwrap();
    let again = dir.path().join("again.toml");
    std::fs::write(&again, first.replace("name = \"read_clicks\"", "name = \"again\"")).unwrap();
    let out =
        server.cli(&token, &["publisher", "register", "events", again.to_str().unwrap(), "--plugin", &plugin_path()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("table `events/clicks` is already written by publisher `events/read_clicks` (topic `clicks`)")
            && stderr.contains("--update")
            && stderr.contains("(HTTP 409)"),
        "{stderr}"
    );
    let listed = server.cli_json(&token, &["publisher", "list", "events"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    // In another collection it writes a table of its own; the plugin given by
    // the digest `weir plugin push` printed.
    server.cli_ok(&token, &["collection", "create", "replay", "--bootstrap-servers", broker.bootstrap_servers()]);
    let pushed = server.cli_ok(&token, &["plugin", "push", &plugin_path()]);
    let digest = pushed.split_whitespace().next().unwrap().to_string();
    assert!(digest.starts_with("sha256:"), "{pushed}");
    let args = ["publisher", "register", "replay", again.to_str().unwrap(), "--plugin", &digest];
    let out = server.cli_ok(&token, &args);
    assert!(out.contains("publisher replay/again registered, writing table replay/clicks"), "{out}");
    let unknown = ["publisher", "register", "replay", again.to_str().unwrap(), "--plugin", "sha256:00", "--update"];
    let missing = String::from_utf8_lossy(&server.cli(&token, &unknown).stderr).to_string();
    assert!(missing.contains("plugin sha256:00 is not uploaded"), "{missing}");
}

#[test]
fn serve_with_an_embedded_broker_runs_a_publisher_with_nothing_else_installed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(&dir.path().join("data"), &["--embedded-broker", "--embedded-topic", "clicks:2"]);
    let said = server.banner.iter().find(|l| l.starts_with("embedded Kafka broker on ")).expect("the broker's address");
    assert!(said.contains("`clicks` (2 partitions)"), "{said}");
    let bootstrap = said["embedded Kafka broker on ".len()..].split(',').next().unwrap().to_string();
    let token = registered(&server, dir.path(), &bootstrap);
    block_on(produce(&bootstrap, "clicks", &clicks(0, 50)));
    server.wait_for_rows(&token, "events", "clicks", 50);
}
