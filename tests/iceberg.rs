//! Iceberg tables (`table_format = "iceberg"`): each weir version is an
//! Iceberg snapshot, and weir's catalog database is the Iceberg SQL catalog,
//! read here by pyiceberg's `SqlCatalog` pointed at it, by Polars over what
//! pyiceberg loads, and by DuckDB's iceberg extension over the current
//! metadata file: the rows of every snapshot, the offsets in each snapshot's
//! summary, pruning by partitions and column bounds in each reader's own plan,
//! and a vacuum's compaction and snapshot expiry; and `weir serve` as an
//! Iceberg REST catalog, through pyiceberg's RestCatalog.

mod common;

use serde_json::{Value, json};
use weir::stream::WorkerOptions;
use weir::tables::{self, TableFormat};

use common::delta::staged;
use common::peers::iceberg_py;
use common::serve::{Server, registered_in};
use common::stream::{Harness, clicks};

fn read(h: &Harness, columns: &str, extra: &[&str]) -> Value {
    let db = h.dir.path().join("catalog.db");
    let mut args = vec!["read", db.to_str().unwrap(), "events.clicks", "--columns", columns];
    args.extend(extra);
    iceberg_py(&args)
}

/// Every reader iceberg.py runs over a local table.
const READERS: [&str; 3] = ["pyiceberg", "polars", "duckdb"];

fn rows_sorted(rows: &Value) -> Vec<String> {
    let mut rows: Vec<String> = rows.as_array().unwrap().iter().map(Value::to_string).collect();
    rows.sort();
    rows
}

fn ids(rows: &Value) -> Vec<String> {
    let mut ids: Vec<String> = rows.as_array().unwrap().iter().map(|r| r[0].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

fn expected(range: std::ops::Range<usize>) -> Vec<String> {
    let mut ids: Vec<String> = range.map(|i| format!("evt-{i}")).collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_is_a_snapshot_pyiceberg_polars_and_duckdb_read_through_weirs_catalog_and_vacuum_keeps_them_whole()
 {
    let h = Harness::new(1);
    // The clicks, a minute apart from 10:00.
    let messages: Vec<String> = clicks(0, 200)
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut click: Value = serde_json::from_str(m).unwrap();
            click["ts"] = json!(format!("2026-11-29T{:02}:{:02}:00Z", 10 + i / 60, i % 60));
            click.to_string()
        })
        .collect();
    h.produce("clicks", &messages).await;
    let mut publisher = h.publisher("read-clicks", json!({"kafka.messages_rollover": 50}), None);
    publisher.table_format = TableFormat::Iceberg;
    let name = publisher.id();
    let mut w = h.start(publisher, WorkerOptions::default());
    w.commits_until(200).await;
    w.stop().await;
    let executions = h.catalog.executions(&name).unwrap();

    let read_all = read(&h, "event_id,user_id,_offset", &[]);
    assert_eq!(read_all["namespaces"], json!(["events"]), "{read_all}");
    assert_eq!(read_all["tables"], json!(["events.clicks"]));
    let snapshots = read_all["snapshots"].as_array().unwrap();
    let ids_of: Vec<i64> = snapshots.iter().map(|s| s["id"].as_i64().unwrap()).collect();
    assert_eq!(ids_of, [1, 2, 3, 4], "a snapshot a weir version, numbered by it");
    for (i, s) in snapshots.iter().enumerate() {
        let v = i as i64 + 1;
        assert_eq!(s["parent"], if v == 1 { Value::Null } else { json!(v - 1) });
        assert_eq!(s["summary"]["operation"], "append");
        assert_eq!(s["summary"]["weir.version"], v.to_string());
        assert_eq!(s["summary"]["added-records"], "50");
        assert_eq!(s["summary"]["total-records"], (50 * v).to_string());
        // Where the publisher resumes, as the Delta log's transaction ids say it.
        let offsets: Value = serde_json::from_str(s["summary"]["weir.offsets"].as_str().unwrap()).unwrap();
        assert_eq!(offsets["events/read_clicks/clicks/0"], json!(50 * v), "{offsets}");
        // And the execution that committed it, as weir's executions say.
        let execution = executions.iter().find(|e| e.table_version == Some(v)).expect("an execution");
        assert_eq!(s["summary"]["weir.execution"], execution.id.to_string(), "{s}");
    }
    let schema = read_all["schema"].as_array().unwrap();
    assert_eq!(schema[0], json!([1, "event_id", "string", false]), "{schema:?}");
    assert!(schema.iter().any(|f| f[1] == "_timestamp" && f[2] == "timestamptz"), "{schema:?}");
    for reader in READERS {
        assert_eq!(ids(&read_all["rows"][reader]), expected(0..200), "{reader}");
    }
    // Time travel: snapshot 2 is the first two batches.
    let at_2 = read(&h, "event_id", &["--snapshot", "2"]);
    for reader in READERS {
        assert_eq!(ids(&at_2["rows"][reader]), expected(0..100), "{reader} at snapshot 2");
    }
    // Column statistics prune files, for pyiceberg's plan and DuckDB's: one batch holds
    // offsets 100..150, and the clicks of 12:00 (the 120th) to 12:49.
    for filter in ["_offset=120", "ts=2026-11-29T12:00:00+00:00"] {
        let pruned = read(&h, "event_id", &["--where", filter]);
        assert_eq!(pruned["files"].as_array().unwrap().len(), 4);
        assert_eq!(pruned["pruned_files"].as_array().unwrap().len(), 1, "{filter}: {pruned}");
        assert_eq!(pruned["duckdb_files_read"], 1, "{filter}");
        for reader in READERS {
            assert_eq!(ids(&pruned["rows"][reader]), ["evt-120"], "{filter}: {reader}");
        }
    }

    // A vacuum keeping one version: older snapshots expire, the compaction is a snapshot of its own.
    let vacuumed = tables::vacuum::vacuum(&h.catalog, "events", "clicks", 1).unwrap();
    assert_eq!(vacuumed.compacted_into, Some(5), "{vacuumed:?}");
    let after = read(&h, "event_id", &[]);
    let kept: Vec<i64> = after["snapshots"].as_array().unwrap().iter().map(|s| s["id"].as_i64().unwrap()).collect();
    assert_eq!(kept, [4, 5], "snapshots before the oldest kept version expired");
    // Versions 1 to 3's files compacted into one; version 4's stays.
    assert_eq!(after["files"].as_array().unwrap().len(), 2, "{after}");
    assert_eq!(after["snapshots"][1]["summary"]["operation"], "replace", "the same rows, in other files");
    for reader in READERS {
        assert_eq!(ids(&after["rows"][reader]), expected(0..200), "{reader} after the compaction");
    }
    // What only the expired snapshots named is gone (their manifest lists and metadata files);
    // the manifests snapshot 4's list names stay.
    let metadata_dir = h.dir.path().join("tables/events/clicks/metadata");
    let names: Vec<String> = std::fs::read_dir(&metadata_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let of = |prefix: &str| names.iter().filter(|n| n.starts_with(prefix)).count();
    assert_eq!((of("snap-1-"), of("snap-3-"), of("snap-4-"), of("snap-5-")), (0, 0, 1, 1), "{names:?}");
    assert_eq!((of("00001-"), of("00003-")), (1, 1), "version 1 and 3's manifests, in snapshot 4's list: {names:?}");
    assert!(
        names.iter().all(|n| !(n.starts_with("0000") && n.ends_with(".metadata.json")) || n >= &"00004".to_string()),
        "{names:?}"
    );
    let at_4 = read(&h, "event_id", &["--snapshot", "4"]);
    for reader in READERS {
        assert_eq!(ids(&at_4["rows"][reader]), expected(0..200), "{reader}: the kept snapshot lost no file");
    }
    // weir's Delta readers read the same table.
    let snapshot = tables::snapshot(&h.catalog, "events", "clicks", None).unwrap();
    assert_eq!(tables::sample(h.catalog.store(), &snapshot, 0, usize::MAX).unwrap().len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_table_has_icebergs_own_spec_and_readers_prune_by_it() {
    let h = Harness::new(1);
    let countries = [Some("DE"), Some("FR"), None];
    let messages: Vec<String> = (0..120)
        .map(|i| {
            let mut click = json!({"event_id": format!("evt-{i}"), "user_id": i % 50, "url": "/",
                                   "ts": format!("2026-11-{}T{:02}:30:00Z", 28 + i % 3, i % 24)});
            if let Some(c) = countries[i % 3] {
                click["country"] = json!(c);
            }
            click.to_string()
        })
        .collect();
    h.produce("clicks", &messages).await;
    let mut publisher = h.publisher("read-clicks", json!({"kafka.messages_rollover": 60}), None);
    publisher.table_format = TableFormat::Iceberg;
    let spec = ["country", "day(ts)", "bucket(4, user_id)"].map(String::from);
    publisher.partitioning.spec = tables::partition::PartitionSpec::parse(&spec).unwrap();
    let mut w = h.start(publisher, WorkerOptions::default());
    w.commits_until(120).await;
    w.stop().await;

    let all = read(&h, "event_id,country,ts", &[]);
    // Iceberg's transforms over the source columns; Delta's derived columns are not Iceberg columns.
    let schema = all["schema"].as_array().unwrap();
    let id_of = |name: &str| schema.iter().find(|f| f[1] == name).unwrap()[0].clone();
    assert_eq!(
        all["spec"],
        json!([
            [id_of("country"), 1000, "country", "identity"],
            [id_of("ts"), 1001, "ts_day", "day"],
            [id_of("user_id"), 1002, "user_id_bucket", "bucket[4]"],
        ]),
    );
    assert!(!schema.iter().any(|f| f[1] == "ts_day" || f[1] == "user_id_bucket"), "{schema:?}");
    let rows = all["rows"]["pyiceberg"].as_array().unwrap();
    assert_eq!(rows.len(), 120);
    // The partition column the files lack comes from each file's partition.
    assert_eq!(rows.iter().filter(|r| r[1] == "DE").count(), 40, "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r[1].is_null()).count(), 40);
    for reader in ["duckdb", "polars"] {
        assert_eq!(rows_sorted(&all["rows"][reader]), rows_sorted(&all["rows"]["pyiceberg"]), "{reader}");
    }
    let files = all["files"].as_array().unwrap().len();
    let de = read(&h, "event_id,country", &["--where", "country=DE"]);
    let pruned = de["pruned_files"].as_array().unwrap().len();
    assert!(pruned * 3 <= files && pruned > 0, "a third of the files or fewer: {pruned} of {files}");
    assert_eq!(de["duckdb_files_read"], pruned, "DuckDB's plan reads the partition's files only");
    let mut want: Vec<String> = (0..120).filter(|i| i % 3 == 0).map(|i| format!("evt-{i}")).collect();
    want.sort();
    for reader in READERS {
        assert_eq!(ids(&de["rows"][reader]), want, "{reader}");
    }
}

#[test]
fn an_added_column_takes_the_next_field_id_and_earlier_snapshots_read_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = weir::catalog::Catalog::open(dir.path()).unwrap();
    staged(&catalog, 0..10, None, false).commit(&catalog, true).unwrap();
    staged(&catalog, 10..20, Some("x"), false).commit(&catalog, true).unwrap();
    let db = dir.path().join("catalog.db");
    let read = |columns: &str, extra: &[&str]| {
        let mut args = vec!["read", db.to_str().unwrap(), "events.t", "--columns", columns];
        args.extend(extra);
        iceberg_py(&args)
    };
    let now = read("id,extra", &[]);
    let fields: Vec<Value> = now["schema"].as_array().unwrap().iter().map(|f| json!([f[0], f[1], f[2]])).collect();
    assert_eq!(fields, [json!([1, "id", "long"]), json!([2, "extra", "string"])], "{now}");
    assert_eq!(now["snapshots"].as_array().unwrap().len(), 2);
    for reader in READERS {
        let mut rows = now["rows"][reader].as_array().unwrap().clone();
        rows.sort_by_key(|r| r[0].as_i64());
        assert_eq!(rows.len(), 20, "{reader}");
        // The first version's rows have no value for the column added after them.
        assert_eq!((&rows[0], &rows[19]), (&json!([0, null]), &json!([19, "x"])), "{reader}");
    }
    // Snapshot 1 reads with its own schema, which has no `extra`.
    let first = read("id", &["--snapshot", "1"]);
    for reader in READERS {
        assert_eq!(first["rows"][reader].as_array().unwrap().len(), 10, "{reader} at snapshot 1");
    }
}

#[test]
fn weir_serve_is_an_iceberg_rest_catalog_each_tenant_seeing_its_own_tables() {
    let broker = common::serve::broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // The collection's tables are Iceberg tables unless a publisher declares otherwise.
    let token = registered_in(&server, dir.path(), broker.bootstrap_servers(), &["--table-format", "iceberg"], "");
    let other = server.tenant("globex", json!({}));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(common::stream::produce(broker.bootstrap_servers(), "clicks", &clicks(0, 150)));
    server.wait_for_rows(&token, "events", "clicks", 150);

    let url = format!("{}/iceberg", server.url);
    let rest = iceberg_py(&["read", &url, "acme.events.clicks", "--token", &token, "--columns", "event_id"]);
    assert_eq!(rest["namespaces"], json!(["acme.events"]), "{rest}");
    assert_eq!(rest["tables"], json!(["acme.events.clicks"]));
    for reader in READERS {
        assert_eq!(ids(&rest["rows"][reader]), expected(0..150), "{reader} through the REST catalog");
    }
    // The same table through the SQL catalog, weir's database itself.
    let db = dir.path().join("catalog.db");
    let sql = iceberg_py(&["read", db.to_str().unwrap(), "acme.events.clicks", "--columns", "event_id"]);
    assert_eq!(sql["location"], rest["location"], "one current metadata file");
    assert_eq!(sql["snapshots"], rest["snapshots"]);

    let shown = server.cli_ok(&token, &["table", "show", "events/clicks"]);
    assert!(shown.contains("format    Delta Lake and Apache Iceberg"), "{shown}");
    assert!(
        shown.contains(&format!("iceberg   acme.events.clicks ({})", sql["location"].as_str().unwrap())),
        "{shown}"
    );

    // Another tenant sees nothing of acme's; the catalog takes no writes.
    let refused = iceberg_py(&["refused", &url, "acme.events.clicks", "--token", &other]);
    assert_eq!(refused["load_table"]["type"], "NoSuchTableError", "{refused}");
    assert_eq!(refused["list_tables"]["type"], "NoSuchNamespaceError", "{refused}");
    let mine = iceberg_py(&["refused", &url, "acme.events.clicks", "--token", &token]);
    assert_eq!(mine["load_table"], Value::Null, "{mine}");
    assert!(mine["create_namespace"]["message"].as_str().unwrap().contains("read-only"), "{mine}");
    let (status, _) = server.http("GET", "/iceberg/v1/config", None, None);
    assert_eq!(status, 401, "a token is needed");

    let collection = server.cli_ok(&token, &["collection", "show", "events"]);
    assert!(collection.contains("(iceberg unless a publisher declares table_format)"), "{collection}");
    // An Iceberg table stays one: a publisher declaring table_format = "delta" is refused.
    let declaration = dir.path().join("read_clicks.toml");
    let delta_only = std::fs::read_to_string(&declaration).unwrap().replacen(
        "[source.kafka]",
        "table_format = \"delta\"\n[source.kafka]",
        1,
    );
    let path = dir.path().join("delta_only.toml");
    std::fs::write(&path, delta_only).unwrap();
    let args = ["publisher", "register", "events", path.to_str().unwrap(), "--plugin", &common::serve::plugin_path()];
    let out = server.cli(&token, &[&args[..], &["--update"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("table `events/clicks` is an Iceberg table, and without table_format = \"iceberg\" its Iceberg readers would stop at its last snapshot"),
        "{stderr}"
    );
}
