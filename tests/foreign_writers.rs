//! Tables other engines write too. deltalake (delta-rs) commits to a table —
//! compactions, deletes, updates, an added column, a protocol upgrade, a
//! vacuum's aftermath — while a publisher keeps consuming from a steady
//! producer, and in the end every produced event is in the latest version
//! exactly once (less what the other writer deleted), as DuckDB, Polars,
//! deltalake and weir's own reading all see it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};
use weir::formats::{DataFormat, Format};
use weir::stream::{WorkerExit, WorkerOptions};
use weir::tables::{self, delta};

use common::peers::delta_py;
use common::stream::{CLICKS_SCHEMA, Harness, RunningWorker, clicks, produce, publisher_with};

/// Events the steady producer sends: in 20 rounds of 50, 150 ms apart.
const PRODUCED: usize = 1000;

fn root(h: &Harness) -> String {
    h.dir.path().join(delta::table_dir("events", "clicks")).display().to_string()
}

/// Commits `action` to the table at `root` as another engine; returns its Delta version.
fn foreign_at(root: String, action: &[&str]) -> i64 {
    let mut args = vec!["write".to_string(), root];
    args.extend(action.iter().map(|s| s.to_string()));
    delta_py(&args)["version"].as_i64().expect("the version it committed")
}

fn foreign(h: &Harness, action: &[&str]) -> i64 {
    foreign_at(root(h), action)
}

fn latest(h: &Harness) -> i64 {
    delta::latest(h.catalog.store(), &delta::table_dir("events", "clicks")).unwrap().expect("a log")
}

fn src_cfg() -> Value {
    json!({"kafka.messages_rollover": 60, "kafka.time_rollover_seconds": 1})
}

fn start(h: &Harness, schema: &str) -> RunningWorker {
    let format = Format::parse(DataFormat::Json, schema, None).unwrap();
    let publisher = publisher_with(h.connection(), &h.runtime, "read-clicks", "clicks", format, src_cfg(), None);
    h.start(publisher, WorkerOptions { first_backoff: Duration::from_millis(200), ..WorkerOptions::default() })
}

/// Sends `n` events from `first`, in rounds of 50, 150 ms apart, in the background.
fn steady_producer(h: &Harness, first: usize, n: usize) -> tokio::task::JoinHandle<()> {
    let bootstrap = h.broker.bootstrap_servers().to_string();
    tokio::spawn(async move {
        for start in (first..first + n).step_by(50) {
            produce(&bootstrap, "clicks", &clicks(start, 50.min(first + n - start))).await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    })
}

/// While the producer sends [`PRODUCED`] events, runs each of `actions` as
/// another writer after one of weir's commits; then waits for every event.
/// Returns the Delta version each action committed.
async fn ingest_among(h: &Harness, w: &mut RunningWorker, actions: &[&[&str]]) -> Vec<i64> {
    let producer = steady_producer(h, 0, PRODUCED);
    let mut seen = 0;
    let mut versions = Vec::new();
    for action in actions {
        seen += w.next_commit().await.rows_out;
        // Blocking, off the runtime: weir keeps committing meanwhile.
        let (root, action): (String, Vec<String>) = (root(h), action.iter().map(|s| s.to_string()).collect());
        let version = tokio::task::spawn_blocking(move || {
            foreign_at(root, &action.iter().map(String::as_str).collect::<Vec<_>>())
        });
        versions.push(version.await.unwrap());
    }
    producer.await.unwrap();
    while seen < PRODUCED as u64 {
        seen += w.next_commit().await.rows_out;
    }
    versions
}

/// The event ids (sorted) each independent reader sees at Delta version `version`.
fn read(h: &Harness, version: i64) -> BTreeMap<String, Vec<String>> {
    let out = delta_py(&["read", &root(h), "--key", "event_id", "--versions", &version.to_string()]);
    let mut seen = BTreeMap::new();
    for reader in ["duckdb", "polars", "deltalake"] {
        let keys = out["versions"][version.to_string()][reader]["keys"]
            .as_array()
            .unwrap_or_else(|| panic!("{reader} read nothing: {out}"))
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        seen.insert(reader.to_string(), keys);
    }
    seen
}

/// The event ids (sorted) of weir's own export of the latest version (`weir table export`).
fn weir_ids(h: &Harness) -> Vec<String> {
    let snapshot = tables::snapshot(&h.catalog, "events", "clicks", None).unwrap();
    let path = h.dir.path().join("export.parquet");
    tables::export(h.catalog.store(), &snapshot, std::fs::File::create(&path).unwrap()).unwrap();
    let mut ids = common::serve::event_ids(&path);
    ids.sort();
    ids
}

fn ids(range: impl IntoIterator<Item = usize>) -> Vec<String> {
    let mut ids: Vec<String> = range.into_iter().map(|i| format!("evt-{i}")).collect();
    ids.sort();
    ids
}

/// Every reader, weir included, sees exactly `expected` (sorted) at the latest version.
fn assert_everyone_sees(h: &Harness, expected: &[String]) {
    for (reader, seen) in read(h, latest(h)) {
        assert_eq!(seen.len(), expected.len(), "{reader}: rows");
        assert_eq!(seen, expected, "{reader}: every event once");
    }
    assert_eq!(weir_ids(h), expected, "weir's own reading");
}

/// Each weir version is in the log exactly once, in order, and the catalog knows where.
fn assert_every_version_logged_once(h: &Harness) {
    let versions = h.catalog.versions("events", "clicks").unwrap();
    let mut last = 0;
    for v in &versions {
        let at = v.delta_version.unwrap_or_else(|| panic!("version {} is not in the log", v.version));
        assert!(at > last, "weir versions go into the log in order");
        let commit = std::fs::read_to_string(format!("{}/_delta_log/{at:020}.json", root(h))).unwrap();
        let info: Value = serde_json::from_str(commit.lines().next().unwrap()).unwrap();
        assert_eq!(info["commitInfo"]["weirVersion"], json!(v.version), "Delta version {at}");
        last = at;
    }
    let weir_commits = (1..=latest(h))
        .filter(|d| {
            let commit = std::fs::read_to_string(format!("{}/_delta_log/{d:020}.json", root(h))).unwrap();
            commit.contains("\"weirVersion\"")
        })
        .count();
    assert_eq!(weir_commits, versions.len(), "no weir version is in the log twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_writers_compactions_neither_hide_nor_double_a_row() {
    let h = Harness::new(3);
    let mut w = start(&h, CLICKS_SCHEMA);
    // A protocol upgrade to a feature weir's appends honour, between the compactions.
    let actions: &[&[&str]] =
        &[&["compact"], &["add-feature", "ChangeDataFeed"], &["compact"], &["z-order", "user_id"]];
    let compactions = ingest_among(&h, &mut w, actions).await;
    w.stop().await;
    assert_everyone_sees(&h, &ids(0..PRODUCED));
    assert_every_version_logged_once(&h);
    // weir's versions came after the other writer's: the log's numbers moved on from weir's.
    let versions = h.catalog.versions("events", "clicks").unwrap();
    let last = versions.last().unwrap();
    assert!(last.delta_version.unwrap() > last.version, "{compactions:?}: weir wrote after them");
    // `table --version N` is weir's version N, wherever the log holds it.
    let snapshot = tables::snapshot(&h.catalog, "events", "clicks", Some(last.version)).unwrap();
    assert_eq!((snapshot.version, snapshot.delta_version), (last.version, last.delta_version.unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_another_writer_deletes_stay_deleted_and_updates_keep_every_row_once() {
    let h = Harness::new(3);
    let mut w = start(&h, CLICKS_SCHEMA);
    let done = ingest_among(
        &h,
        &mut w,
        &[&["delete", "duration_ms % 10 = 0"], &["update", "duration_ms % 10 = 1", "url", "'/changed'"]],
    )
    .await;
    w.stop().await;
    // What the delete removed: rows at the version before it that its own version lacks.
    let (before, after) = (read(&h, done[0] - 1), read(&h, done[0]));
    let gone: BTreeSet<&String> =
        before["deltalake"].iter().filter(|id| after["deltalake"].binary_search(id).is_err()).collect();
    assert!(!gone.is_empty(), "the delete removed rows");
    assert!(gone.iter().all(|id| id[4..].parse::<usize>().unwrap() % 10 == 0), "only the rows it matched");
    let expected: Vec<String> = ids(0..PRODUCED).into_iter().filter(|id| !gone.contains(id)).collect();
    assert_everyone_sees(&h, &expected);
    assert_every_version_logged_once(&h);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_another_writer_adds_is_null_in_batches_without_it_and_written_by_one_that_returns_it() {
    let h = Harness::new(3);
    let mut w = start(&h, CLICKS_SCHEMA);
    let retention = ["delta.logRetentionDuration", "interval 60 days"];
    let actions: &[&[&str]] = &[&["add-column", "note", "string"], &["set-property", retention[0], retention[1]]];
    ingest_among(&h, &mut w, actions).await;
    w.stop().await;
    // The publisher now returns the column too, and one the table has not seen.
    let with_note = CLICKS_SCHEMA.replace(
        r#""device": { "type": "string" }"#,
        r#""device": { "type": "string" }, "note": { "type": "string" }, "tag": { "type": "string" }"#,
    );
    let mut w = start(&h, &with_note);
    let noted: Vec<String> = (PRODUCED..PRODUCED + 100)
        .map(|i| {
            json!({"event_id": format!("evt-{i}"), "user_id": 1, "url": "/", "ts": "2026-11-29T10:00:00Z", "note": "hi", "tag": "t"})
                .to_string()
        })
        .collect();
    h.produce("clicks", &noted).await;
    w.commits_until(100).await;
    w.stop().await;
    assert_everyone_sees(&h, &ids(0..PRODUCED + 100));
    let snapshot = tables::snapshot(&h.catalog, "events", "clicks", None).unwrap();
    let rows = tables::sample(h.catalog.store(), &snapshot, 0, usize::MAX).unwrap();
    assert_eq!(rows.iter().filter(|r| r["note"] == "hi").count(), 100, "the publisher's values of the column");
    // The log has the column once, with weir's columns.
    let out = delta_py(&["read", &root(&h), "--key", "event_id", "--versions", &snapshot.delta_version.to_string()]);
    let names: Vec<&str> =
        out["schema"]["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names.iter().filter(|n| **n == "note").count(), 1, "{names:?}");
    assert!(names.contains(&"event_id") && names.contains(&"_offset") && names.contains(&"tag"), "{names:?}");
    // weir's commit that added `tag` kept the other writer's table property.
    assert_eq!(out["configuration"][retention[0]], retention[1], "{}", out["configuration"]);
    assert_every_version_logged_once(&h);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_feature_weir_lacks_stops_the_publisher_with_offsets_unmoved_until_it_is_dropped() {
    let h = Harness::new(3);
    let mut w = start(&h, CLICKS_SCHEMA);
    h.produce("clicks", &clicks(0, 200)).await;
    w.commits_until(200).await;
    let upgraded = foreign(&h, &["add-feature", "DeletionVectors"]);
    let offsets = h.catalog.offsets("events/read_clicks", "clicks").unwrap();
    h.produce("clicks", &clicks(200, 100)).await;
    let exit = tokio::time::timeout(Duration::from_secs(60), w.handle).await.unwrap().unwrap().unwrap();
    let WorkerExit::Failed(error) = exit else { panic!("the publisher should stop: {exit:?}") };
    assert!(error.contains(&format!("Delta version {upgraded}")), "{error}");
    assert!(error.contains("deletionVectors") && error.contains("weir publisher resume"), "{error}");
    // Stopped at once (no retries), with nothing committed past the change.
    assert_eq!(h.catalog.offsets("events/read_clicks", "clicks").unwrap(), offsets, "offsets unmoved");
    let failed: Vec<_> =
        h.catalog.executions("events/read_clicks").unwrap().into_iter().filter(|e| e.status != "committed").collect();
    assert_eq!(failed.len(), 1, "one attempt, not five: {failed:?}");

    // The feature dropped (as Spark's DROP FEATURE does), the publisher resumes: nothing lost.
    foreign(&h, &["drop-feature", "deletionVectors"]);
    let mut w = start(&h, CLICKS_SCHEMA);
    w.commits_until(100).await;
    w.stop().await;
    assert_everyone_sees(&h, &ids(0..300));
    assert_every_version_logged_once(&h);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weirs_vacuum_after_another_writers_compaction_and_delete_keeps_every_kept_version_whole() {
    let h = Harness::new(3);
    let mut w = start(&h, CLICKS_SCHEMA);
    ingest_among(&h, &mut w, &[&["compact"], &["delete", "duration_ms % 7 = 0"]]).await;
    w.stop().await;
    let versions = h.catalog.versions("events", "clicks").unwrap();
    let keep = 4;
    let kept_from = versions[versions.len() - keep].delta_version.unwrap();
    let before: BTreeMap<i64, _> = (kept_from..=latest(&h)).map(|v| (v, read(&h, v))).collect();
    let expected = weir_ids(&h);

    let done = tables::vacuum::vacuum(&h.catalog, "events", "clicks", keep as i64).unwrap();
    assert!(done.deleted_files > 0, "the files the compaction and the delete replaced go: {done:?}");
    for (v, seen) in before {
        assert_eq!(read(&h, v), seen, "Delta version {v} reads the same after the vacuum");
    }
    assert_everyone_sees(&h, &expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_cannot_take_versions_is_reported_and_its_publisher_waits_at_the_bound() {
    let h = Harness::new(3);
    let mut w = start(&h, CLICKS_SCHEMA);
    h.produce("clicks", &clicks(0, 60)).await;
    w.commits_until(60).await;
    // Something the log cannot get past where its next commit goes (a full
    // disk, a store outage, permissions: here, a directory in the way).
    let next = latest(&h) + 1;
    let obstacle = format!("{}/_delta_log/{next:020}.json", root(&h));
    std::fs::create_dir(&obstacle).unwrap();
    h.produce("clicks", &clicks(60, 600)).await;
    let error = w
        .next_matching(|e| match e {
            weir::stream::WorkerEvent::AttemptFailed { error, .. } => Some(error.clone()),
            _ => None,
        })
        .await;
    assert!(error.contains("not in its Delta log, so no reader sees them"), "{error}");
    let unlogged = h.catalog.unlogged_versions("events", "clicks").unwrap();
    assert_eq!(unlogged.len(), delta::UNLOGGED_BOUND, "the publisher stops taking batches at the bound");
    let lag = delta::lag(&h.catalog, "events", "clicks").unwrap().expect("the log is behind");
    assert_eq!((lag.unlogged, lag.since_version), (delta::UNLOGGED_BOUND, unlogged[0].version));
    assert!(lag.error.is_some_and(|e| e.contains(&format!("{next:020}.json"))), "the cause is said");
    assert_eq!(h.catalog.unlogged().unwrap(), [("events".into(), "clicks".into(), delta::UNLOGGED_BOUND as i64)]);
    // Readers see the table as it was; weir says why a version is missing.
    let err = tables::snapshot(&h.catalog, "events", "clicks", Some(unlogged[0].version)).unwrap_err().to_string();
    assert!(err.contains("committed but not yet in its Delta log"), "{err}");

    // Cleared, the versions go in and the publisher goes on: nothing lost or doubled.
    std::fs::remove_dir(&obstacle).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while h.catalog.versions("events", "clicks").unwrap().iter().map(|v| v.rows).sum::<u64>() < 660 {
        assert!(std::time::Instant::now() < deadline, "every event committed within 120 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    w.stop().await;
    assert!(delta::lag(&h.catalog, "events", "clicks").unwrap().is_none());
    assert_everyone_sees(&h, &ids(0..660));
    assert_every_version_logged_once(&h);
}
