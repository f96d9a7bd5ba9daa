//! Every table is a Delta Lake table: each weir version is a Delta version
//! (of the same number while weir is its only writer), read here by independent engines (DuckDB's delta
//! extension, Polars, deltalake), never by weir's own reader alone: the rows of
//! every version, the offsets kept as transaction ids, checkpoints, a schema
//! that gains a column, and a change that is refused.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use weir::catalog::{Catalog, CatalogError};
use weir::formats::{DataFormat, Format};
use weir::stream::{WorkerExit, WorkerOptions};
use weir::tables::{self, delta};

use common::delta::commit_version;
use common::peers::delta_py;
use common::stream::{CLICKS_SCHEMA, Harness, clicks, publisher_with};

fn table_root(data_dir: &Path, collection: &str, table: &str) -> PathBuf {
    data_dir.join(delta::table_dir(collection, table))
}

/// Each version's sorted keys as weir reads them through the log.
fn weir_keys(catalog: &Catalog, collection: &str, table: &str, version: i64, key: &str) -> Vec<Value> {
    let snapshot = tables::snapshot(catalog, collection, table, Some(version)).unwrap();
    let rows = tables::sample(catalog.store(), &snapshot, 0, usize::MAX).unwrap();
    let mut keys: Vec<Value> = rows.iter().map(|r| r[key].clone()).collect();
    keys.sort_by_key(|k| k.to_string());
    keys
}

/// What each reader saw of `version`, checked to be the same rows as `expected`.
fn assert_readers_see(read: &Value, version: i64, expected: &[Value]) {
    let mut expected: Vec<String> = expected.iter().map(|k| k.as_str().map_or(k.to_string(), str::to_string)).collect();
    expected.sort();
    for reader in ["duckdb", "polars", "deltalake"] {
        let seen = &read["versions"][version.to_string()][reader];
        let mut keys: Vec<String> = seen["keys"]
            .as_array()
            .unwrap_or_else(|| panic!("{reader} did not read version {version}: {read}"))
            .iter()
            .map(|k| k.as_str().map_or(k.to_string(), str::to_string))
            .collect();
        keys.sort();
        assert_eq!(keys, expected, "{reader} at version {version}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_reads_the_same_in_duckdb_polars_and_deltalake_and_keeps_the_offsets() {
    let h = Harness::new(3);
    h.produce("clicks", &clicks(0, 200)).await;
    let mut w = h.start(
        h.publisher("read-clicks", json!({"kafka.messages_rollover": 40, "kafka.time_rollover_seconds": 1}), None),
        WorkerOptions::default(),
    );
    w.commits_until(200).await;
    w.stop().await;

    let versions = h.catalog.versions("events", "clicks").unwrap();
    let latest = versions.last().unwrap().version;
    assert!(latest >= 5, "200 messages in batches of at most 40 make at least 5 versions, not {latest}");
    let root = table_root(h.dir.path(), "events", "clicks");
    let offsets = h.catalog.offsets("events/read_clicks", "clicks").unwrap();
    let mut args = vec!["read".to_string(), root.display().to_string(), "--key".into(), "event_id".into()];
    for p in offsets.keys() {
        args.extend(["--txn".to_string(), format!("events/read_clicks/clicks/{p}")]);
    }
    let read = delta_py(&args);

    assert_eq!(read["latest"], latest, "weir version N is Delta version N");
    for v in 1..=latest {
        assert_readers_see(&read, v, &weir_keys(&h.catalog, "events", "clicks", v, "event_id"));
    }
    let all = read["versions"][latest.to_string()]["duckdb"]["rows"].as_u64().unwrap();
    assert_eq!(all, 200, "the latest version holds every message");
    for (p, next) in &offsets {
        assert_eq!(read["txn"][format!("events/read_clicks/clicks/{p}")], json!(next), "partition {p}'s offset");
    }
    // Provenance columns in Delta's types: the Kafka timestamp in microseconds.
    let fields = read["schema"]["fields"].as_array().unwrap();
    let ty = |name: &str| fields.iter().find(|f| f["name"] == name).map(|f| f["type"].clone());
    assert_eq!(
        (ty("_partition"), ty("_offset"), ty("_timestamp")),
        (Some(json!("integer")), Some(json!("long")), Some(json!("timestamp")))
    );
    // The log names each version's execution.
    let commit = std::fs::read_to_string(root.join("_delta_log/00000000000000000001.json")).unwrap();
    let info: Value = serde_json::from_str(commit.lines().next().unwrap()).unwrap();
    assert_eq!(info["commitInfo"]["weirExecution"], json!(versions[0].execution.unwrap()));
}

/// [`commit_only`] of `ids`, then the log brought up to it.
fn commit(
    catalog: &Catalog,
    ids: std::ops::Range<i64>,
    extra: Option<&str>,
    id_type_string: bool,
) -> Result<i64, CatalogError> {
    let version = commit_version(catalog, ids, extra, id_type_string)?;
    delta::sync(catalog, "events", "t").unwrap();
    Ok(version)
}

fn commit_only(catalog: &Catalog, ids: std::ops::Range<i64>) -> Result<i64, CatalogError> {
    commit_version(catalog, ids, None, false)
}

#[test]
fn checkpoints_keep_a_long_table_quick_to_open_at_any_version() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    for v in 0..205 {
        commit(&catalog, v * 3..v * 3 + 3, None, false).unwrap();
    }
    let root = table_root(dir.path(), "events", "t");
    let log = root.join("_delta_log");
    for cp in [100, 200] {
        assert!(log.join(format!("{cp:020}.checkpoint.parquet")).exists(), "a checkpoint at {cp}");
    }
    let hint: Value = serde_json::from_str(&std::fs::read_to_string(log.join("_last_checkpoint")).unwrap()).unwrap();
    assert_eq!(hint["version"], 200);

    // Readers open the table from its checkpoints: with the commits before the
    // last checkpoint gone (as after a log clean-up), the newer versions still read.
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(copy.join("_delta_log")).unwrap();
    for entry in std::fs::read_dir(&log).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        let before_checkpoint = name.ends_with(".json") && name[..20].parse::<i64>().unwrap() < 200;
        if !before_checkpoint {
            std::fs::copy(entry.path(), copy.join("_delta_log").join(&name)).unwrap();
        }
    }
    for entry in std::fs::read_dir(&root).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let read = delta_py(&["read", copy.to_str().unwrap(), "--key", "id", "--versions", "200,203,205"]);
    assert_eq!(read["latest"], 205);
    for v in [200i64, 203, 205] {
        let expected: Vec<Value> = (0..v * 3).map(|i| json!(i)).collect();
        assert_readers_see(&read, v, &expected);
    }
    // Every version of the whole log, around both checkpoints, reads the same in each engine and in weir.
    let versions = "1,99,100,101,150,199,200,201,205";
    let read =
        delta_py(&["read", root.to_str().unwrap(), "--key", "id", "--versions", versions, "--txn", "events/p/topic/0"]);
    for v in versions.split(',').map(|v| v.parse::<i64>().unwrap()) {
        assert_readers_see(&read, v, &weir_keys(&catalog, "events", "t", v, "id"));
        assert_eq!(weir_keys(&catalog, "events", "t", v, "id").len() as i64, v * 3);
    }
    assert_eq!(read["txn"]["events/p/topic/0"], 205 * 3);
}

#[test]
fn a_batch_may_add_a_column_and_any_other_change_is_refused_uncommitted() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    commit(&catalog, 0..3, None, false).unwrap();
    assert_eq!(commit(&catalog, 3..6, Some("x"), false).unwrap(), 2);
    let root = table_root(dir.path(), "events", "t");
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "id"]);
    let names: Vec<&str> =
        read["schema"]["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["id", "extra"], "version 2 added a column");
    assert_readers_see(&read, 2, &(0..6).map(|i| json!(i)).collect::<Vec<_>>());
    // The older rows read the new column as null; an export holds both.
    let snapshot = tables::snapshot(&catalog, "events", "t", None).unwrap();
    let rows = tables::sample(catalog.store(), &snapshot, 0, 10).unwrap();
    assert_eq!((rows[0].get("extra"), &rows[5]["extra"]), (None, &json!("x")));
    let mut out = Vec::new();
    assert_eq!(tables::export(catalog.store(), &snapshot, &mut out).unwrap(), 6);

    // A type change is refused, naming the column and both types; nothing is committed.
    let err = commit(&catalog, 6..9, Some("y"), true).unwrap_err();
    assert!(err.to_string().contains("column `id` is long in the table, string in the batch"), "{err}");
    assert_eq!(catalog.versions("events", "t").unwrap().len(), 2);
    assert_eq!(
        delta::latest(catalog.store(), &delta::table_dir("events", "t")).unwrap(),
        Some(2),
        "no Delta commit for a refused batch"
    );
    // Leaving a column out is a change too.
    let err = commit(&catalog, 6..9, None, false).unwrap_err();
    assert!(err.to_string().contains("column `extra` (string) is missing from the batch"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_type_change_fails_the_batch_with_the_columns_and_commits_nothing() {
    let h = Harness::new(1);
    h.produce("clicks", &clicks(0, 10)).await;
    let src_cfg = json!({"kafka.messages_rollover": 10});
    let mut w = h.start(h.publisher("read-clicks", src_cfg.clone(), None), WorkerOptions::default());
    w.commits_until(10).await;
    w.stop().await;

    // The owner changes `user_id` from an integer to a string.
    let schema = CLICKS_SCHEMA.replace(r#""user_id": { "type": "integer" }"#, r#""user_id": { "type": "string" }"#);
    let format = Format::parse(DataFormat::Json, &schema, None).unwrap();
    let values: Vec<String> = (10..20)
        .map(|i| json!({"event_id": format!("evt-{i}"), "user_id": format!("u{i}"), "url": "/", "ts": "2026-11-29T10:00:00Z"}).to_string())
        .collect();
    h.produce("clicks", &values).await;
    let publisher = publisher_with(h.connection(), &h.runtime, "read-clicks", "clicks", format, src_cfg, None);
    let options =
        WorkerOptions { max_attempts: 2, first_backoff: Duration::from_millis(100), ..WorkerOptions::default() };
    let w = h.start(publisher, options);
    let exit = tokio::time::timeout(Duration::from_secs(60), w.handle).await.unwrap().unwrap().unwrap();
    let WorkerExit::Failed(error) = exit else { panic!("the publisher fails: {exit:?}") };
    assert!(error.contains("column `user_id` is long in the table, string in the batch"), "{error}");
    assert_eq!(h.catalog.versions("events", "clicks").unwrap().len(), 1, "nothing committed");
    assert_eq!(h.catalog.offsets("events/read_clicks", "clicks").unwrap()[&0], 10, "the offsets stay");
    let root = table_root(h.dir.path(), "events", "clicks");
    assert_eq!(delta::latest(h.catalog.store(), &delta::table_dir("events", "clicks")).unwrap(), Some(1));
    let files = std::fs::read_dir(&root)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "parquet"))
        .count();
    assert_eq!(files, 1, "the refused batch's file is gone");
}

#[test]
fn a_log_behind_the_catalog_is_repaired_and_a_foreign_commit_is_followed_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    for v in 0..3 {
        commit(&catalog, v * 2..v * 2 + 2, None, false).unwrap();
    }
    let root = table_root(dir.path(), "events", "t");
    let log = root.join("_delta_log");
    // As if the process had died after the catalog's commits of versions 2 and
    // 3 and before their Delta commits: the log is repaired from the catalog.
    let (two, three) = (log.join(format!("{:020}.json", 2)), log.join(format!("{:020}.json", 3)));
    let original = std::fs::read(&three).unwrap();
    std::fs::remove_file(&two).unwrap();
    std::fs::remove_file(&three).unwrap();
    let synced = delta::sync(&catalog, "events", "t").unwrap();
    assert_eq!((synced.written, synced.version), (2, Some(3)));
    assert_eq!(std::fs::read(&three).unwrap(), original, "the same bytes: a pure function of the catalog");
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "id"]);
    assert_readers_see(&read, 3, &(0..6).map(|i| json!(i)).collect::<Vec<_>>());
    assert_eq!(delta::sync(&catalog, "events", "t").unwrap().written, 0, "writing again writes nothing");

    // Another writer's commit where weir's version 4 would go: weir never
    // overwrites it, and writes its version 4 after it, as Delta version 5.
    let four = log.join(format!("{:020}.json", 4));
    std::fs::write(&four, b"{\"commitInfo\":{\"engineInfo\":\"someone else\"}}\n").unwrap();
    commit_only(&catalog, 6..8).unwrap();
    let synced = delta::sync(&catalog, "events", "t").unwrap();
    assert_eq!((synced.written, synced.version), (1, Some(5)));
    assert!(std::fs::read_to_string(&four).unwrap().contains("someone else"));
    let versions = catalog.versions("events", "t").unwrap();
    let placed: Vec<(i64, Option<i64>)> = versions.iter().map(|v| (v.version, v.delta_version)).collect();
    assert_eq!(placed, [(1, Some(1)), (2, Some(2)), (3, Some(3)), (4, Some(5))]);
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "id", "--versions", "5"]);
    assert_readers_see(&read, 5, &(0..8).map(|i| json!(i)).collect::<Vec<_>>());
    // weir's version 4 reads as Delta version 5 says.
    assert_eq!(weir_keys(&catalog, "events", "t", 4, "id"), (0..8).map(|i| json!(i)).collect::<Vec<_>>());
}

#[test]
fn vacuum_keeps_the_last_versions_readable_and_deletes_only_what_older_ones_read() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    for v in 0..10 {
        commit(&catalog, v * 4..v * 4 + 4, None, false).unwrap();
    }
    let root = table_root(dir.path(), "events", "t");
    let parquet_files = || {
        std::fs::read_dir(&root)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".parquet"))
            .count()
    };
    let all = |upto: i64| (0..upto * 4).map(|i| json!(i)).collect::<Vec<_>>();

    // Versions 8, 9 and 10 are kept: the files of versions 1..7 are compacted
    // into one, as version 11; every file is still needed, so none goes.
    let done = tables::vacuum::vacuum(&catalog, "events", "t", 3).unwrap();
    assert_eq!((done.kept_from, done.deleted_files, done.compacted_files, done.compacted_into), (8, 0, 7, Some(11)));
    assert_eq!(parquet_files(), 11);
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "id", "--versions", "1,8,10,11"]);
    for (v, rows) in [(1, 1), (8, 8), (10, 10), (11, 10)] {
        assert_readers_see(&read, v, &all(rows));
    }
    // Compaction changes no data: weir counts the same rows.
    assert_eq!(tables::snapshot(&catalog, "events", "t", None).unwrap().rows, 40);

    // Three versions on (which add a column), version 11 is older than the
    // kept ones: the seven files it replaced are deleted; every kept version
    // still reads in full.
    for v in 10..13 {
        commit(&catalog, v * 4..v * 4 + 4, Some("new"), false).unwrap();
    }
    let done = tables::vacuum::vacuum(&catalog, "events", "t", 3).unwrap();
    assert_eq!((done.kept_from, done.deleted_files), (12, 7));
    assert!(done.compacted_into.is_some(), "{done:?}");
    let latest = done.latest;
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "id", "--versions", &format!("12,13,14,{latest}")]);
    for (v, rows) in [(12, 11), (13, 12), (14, 13), (latest, 13)] {
        assert_readers_see(&read, v, &all(rows));
    }
    // The compacted file comes last in the log yet predates the new column: it
    // carries it as nulls, so weir's own reading keeps every column.
    let snapshot = tables::snapshot(&catalog, "events", "t", None).unwrap();
    let columns: Vec<String> =
        tables::schema(catalog.store(), &snapshot).unwrap().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(columns, ["id", "extra"]);
    let rows = tables::sample(catalog.store(), &snapshot, 0, 100).unwrap();
    assert_eq!(rows.iter().filter(|r| r["extra"] == "new").count(), 12, "the added column's values survive");
}

#[test]
fn a_weir_compaction_another_writer_overtook_is_given_up_and_never_brings_deleted_rows_back() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    for v in 0..3 {
        commit(&catalog, v * 4..v * 4 + 4, None, false).unwrap();
    }
    let root = table_root(dir.path(), "events", "t");
    // Another writer deletes a row, rewriting version 1's file without it.
    let deleted = delta_py(&["write", root.to_str().unwrap(), "delete", "id = 1"])["version"].as_i64().unwrap();
    // weir's compaction of versions 1 and 2's files (planned from the catalog, committed after the delete).
    let versions = catalog.versions("events", "t").unwrap();
    let replaced: Vec<_> = versions[..2].iter().flat_map(|v| v.files.clone()).collect();
    let mut compacted = replaced[0].clone();
    compacted.path = compacted.path.replace(".parquet", "-compacted.parquet");
    std::fs::copy(dir.path().join(&replaced[0].path), dir.path().join(&compacted.path)).unwrap();
    let version = catalog.commit_compaction("events", "t", &[compacted], &replaced).unwrap();
    delta::sync(&catalog, "events", "t").unwrap();

    let at = catalog.delta_version_of("events", "t", version).unwrap().flatten().unwrap();
    assert_eq!(at, deleted + 1);
    let commit = std::fs::read_to_string(root.join(format!("_delta_log/{at:020}.json"))).unwrap();
    assert_eq!(commit.lines().count(), 1, "only its commitInfo: {commit}");
    assert!(commit.contains("abandoned") && commit.contains("removed by another writer first"), "{commit}");
    let read = delta_py(&["read", root.to_str().unwrap(), "--key", "id", "--versions", &at.to_string()]);
    let expected: Vec<Value> = (0..12).filter(|i| *i != 1).map(|i| json!(i)).collect();
    assert_readers_see(&read, at, &expected);
    let mut expected = expected;
    expected.sort_by_key(|k| k.to_string());
    assert_eq!(weir_keys(&catalog, "events", "t", version, "id"), expected, "weir reads it as every engine does");
}

#[test]
fn rows_another_writer_deleted_through_a_deletion_vector_are_refused_by_name_not_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    commit(&catalog, 0..4, None, false).unwrap();
    let root = table_root(dir.path(), "events", "t");
    let log = root.join("_delta_log");
    // As Spark writes a DELETE on a table with deletion vectors: the file again, with a vector.
    let one = std::fs::read_to_string(log.join(format!("{:020}.json", 1))).unwrap();
    let add: Value =
        one.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|a| a.get("add").is_some()).unwrap();
    let mut readded = add["add"].clone();
    readded["deletionVector"] = json!({"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f", "offset": 1, "sizeInBytes": 36, "cardinality": 1});
    let lines = [
        json!({"commitInfo": {"operation": "DELETE", "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}}),
        json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}}),
        json!({"remove": {"path": add["add"]["path"], "dataChange": true, "deletionTimestamp": 0}}),
        json!({"add": readded}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(log.join(format!("{:020}.json", 2)), text).unwrap();

    let err = tables::snapshot(&catalog, "events", "t", None).unwrap_err().to_string();
    assert!(err.contains("deletion vector") && err.contains("Delta version 2"), "{err}");
    assert!(err.contains(add["add"]["path"].as_str().unwrap()), "the file is named: {err}");
    // And weir writes no more into it: the feature stops its commits.
    commit_only(&catalog, 4..8).unwrap();
    let blocked = delta::sync(&catalog, "events", "t").unwrap_err();
    let blocked = blocked.downcast_ref::<delta::Blocked>().expect("a Blocked error");
    assert_eq!((blocked.version, blocked.writer.as_str()), (2, "Apache-Spark/4.0.0 Delta-Lake/4.0.0 (DELETE)"));
}

/// Clicks over three days, three pages and three countries (one of them
/// given as "", which partitions as null, as in Hive and Spark, and one
/// missing): `(message, [event_id, country, ts_day, url])`.
fn spread_clicks(n: usize) -> (Vec<String>, Vec<Value>) {
    let urls = ["/docs", "/a b?c=d", "/"];
    (0..n)
        .map(|i| {
            let (url, day, hour) = (urls[i % 3], 28 + (i / 7) % 3, i % 24);
            let mut click = json!({"event_id": format!("evt-{i}"), "user_id": i % 50, "url": url,
                                   "ts": format!("2026-11-{day}T{hour:02}:30:00Z")});
            let country = ["DE", "FR", ""].get(i % 4).copied();
            if let Some(c) = country {
                click["country"] = json!(c);
            }
            let country = country.filter(|c| !c.is_empty());
            (click.to_string(), json!([format!("evt-{i}"), country, format!("2026-11-{day}"), url]))
        })
        .unzip()
}

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|r| r.to_string());
    rows
}

const PARTITION_COLUMNS: &str = "event_id,country,ts_day,url";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_table_is_a_file_per_partition_that_every_engine_reads_prunes_and_weir_compacts_in_place() {
    let h = Harness::new(1);
    let (messages, expected) = spread_clicks(180);
    h.produce("clicks", &messages).await;
    let mut publisher = h.publisher("read-clicks", json!({"kafka.messages_rollover": 60}), None);
    let spec = ["country", "day(ts)", "url"].map(String::from);
    publisher.partitioning.spec = tables::partition::PartitionSpec::parse(&spec).unwrap();
    let mut w = h.start(publisher, WorkerOptions::default());
    w.commits_until(180).await;
    w.stop().await;
    let versions = h.catalog.versions("events", "clicks").unwrap();
    assert_eq!(versions.len(), 3);
    // 3 countries (null one) × 3 days × 3 pages, each its own file in each batch of 60.
    assert_eq!(versions[0].files.len(), 27);
    let root = table_root(h.dir.path(), "events", "clicks");
    assert!(
        root.join("country=DE/ts_day=2026-11-28/url=%2Fa%20b%3Fc%3Dd").is_dir(),
        "Hive-style, escaped as delta-rs does"
    );
    assert!(root.join("country=__HIVE_DEFAULT_PARTITION__/ts_day=2026-11-30/url=%2F").is_dir());

    let read = delta_py(&["partitions", root.to_str().unwrap(), "--columns", PARTITION_COLUMNS]);
    assert_eq!(read["partition_columns"], json!(["country", "ts_day", "url"]));
    assert_eq!(read["configuration"]["weir.partitionBy"], json!(r#"["country","day(ts)","url"]"#));
    for reader in ["duckdb", "polars", "deltalake"] {
        let rows: Vec<Value> = read["rows"][reader].as_array().unwrap().clone();
        assert_eq!(sorted(rows), sorted(expected.clone()), "{reader} reads every row with its partition's values");
    }
    // A filter on a partition column reads that partition's files only.
    let read =
        delta_py(&["partitions", root.to_str().unwrap(), "--columns", PARTITION_COLUMNS, "--where", "url=/a b?c=d"]);
    let (all, pruned) = (read["files"].as_array().unwrap(), read["pruned_files"].as_array().unwrap());
    assert_eq!((all.len(), pruned.len()), (81, 27), "{read}");
    let in_partition: Vec<Value> = expected.iter().filter(|r| r[3] == "/a b?c=d").cloned().collect();
    for reader in ["duckdb", "polars", "deltalake"] {
        let rows: Vec<Value> = read["rows"][reader].as_array().unwrap().clone();
        assert_eq!(sorted(rows), sorted(in_partition.clone()), "{reader}");
    }
    // weir reads it as the others do.
    let snapshot = tables::snapshot(&h.catalog, "events", "clicks", None).unwrap();
    let rows = tables::sample(h.catalog.store(), &snapshot, 0, usize::MAX).unwrap();
    let ours: Vec<Value> = rows.iter().map(|r| json!([r["event_id"], r["country"], r["ts_day"], r["url"]])).collect();
    assert_eq!(sorted(ours), sorted(expected.clone()));

    // Compaction joins the old versions' files of each partition, in that partition.
    let done = tables::vacuum::vacuum(&h.catalog, "events", "clicks", 1).unwrap();
    assert_eq!((done.compacted_files, done.compacted_into), (54, Some(4)), "{done:?}");
    let read = delta_py(&["partitions", root.to_str().unwrap(), "--columns", PARTITION_COLUMNS]);
    assert_eq!(read["files"].as_array().unwrap().len(), 54, "27 compacted, 27 of the last version");
    for reader in ["duckdb", "polars", "deltalake"] {
        let rows: Vec<Value> = read["rows"][reader].as_array().unwrap().clone();
        assert_eq!(sorted(rows), sorted(expected.clone()), "{reader} after the compaction");
    }
    let compacted = &h.catalog.versions("events", "clicks").unwrap()[3];
    assert!(compacted.files.iter().all(|f| f.path.contains("/country=") && !f.partition_values.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_past_its_partition_bound_or_partitioned_otherwise_than_its_table_fails_committing_nothing() {
    let h = Harness::new(1);
    let (messages, _) = spread_clicks(20);
    h.produce("clicks", &messages[..10]).await;
    let src_cfg = json!({"kafka.messages_rollover": 10});
    let options =
        WorkerOptions { max_attempts: 2, first_backoff: Duration::from_millis(100), ..WorkerOptions::default() };
    let failed = |mut publisher: weir::publisher::StreamPublisher, spec: &[&str], bound: usize| {
        let spec: Vec<String> = spec.iter().map(|s| s.to_string()).collect();
        publisher.partitioning = tables::partition::Partitioning {
            spec: tables::partition::PartitionSpec::parse(&spec).unwrap(),
            max_per_batch: bound,
        };
        let w = h.start(publisher, options.clone());
        async move {
            let _running = w.stop; // dropped, it would stop the worker
            let exit = tokio::time::timeout(Duration::from_secs(60), w.handle).await.unwrap().unwrap().unwrap();
            let WorkerExit::Failed(error) = exit else { panic!("the publisher fails: {exit:?}") };
            error
        }
    };
    let error = failed(h.publisher("read-clicks", src_cfg.clone(), None), &["url", "day(ts)"], 2).await;
    assert!(
        error.contains("the batch writes more than 2 partitions of the table (partition_by = [\"url\", \"day(ts)\"]")
            && error.contains("raise max_partitions_per_batch (at most 10000)"),
        "{error}"
    );
    assert!(h.catalog.versions("events", "clicks").unwrap().is_empty(), "nothing committed");

    let mut w = h.start(h.publisher("read-clicks", src_cfg.clone(), None), WorkerOptions::default());
    w.commits_until(10).await;
    w.stop().await;
    h.produce("clicks", &messages[10..]).await;
    let error = failed(h.publisher("read-clicks", src_cfg, None), &["url"], 100).await;
    assert!(error.contains("table `clicks` is not partitioned, and the batch partitioned by [\"url\"]"), "{error}");
    assert_eq!(h.catalog.versions("events", "clicks").unwrap().len(), 1, "nothing more committed");
    assert_eq!(h.catalog.offsets("events/read_clicks", "clicks").unwrap()[&0], 10, "the offsets stay");
}
