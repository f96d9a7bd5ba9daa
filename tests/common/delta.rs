//! Table versions committed straight through the catalog, as a worker
//! commits them (a real parquet file, its stats, its offsets), for the Delta
//! log's tests and benchmark.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use serde_json::json;
use weir::catalog::{BatchCommit, Catalog, CatalogError, Execution, NewVersion, PartitionRange, Timings, Txn, now_ms};
use weir::plugin::OutputSink;
use weir::stream::stage::TableSink;

/// Commits a version of `events/t` with rows `ids` (and, when given, a
/// column `extra`) straight through the catalog, as a worker does.
pub fn commit_version(
    catalog: &Catalog,
    ids: std::ops::Range<i64>,
    extra: Option<&str>,
    id_type_string: bool,
) -> Result<i64, CatalogError> {
    let mut columns: Vec<(&str, ArrayRef)> = vec![if id_type_string {
        ("id", Arc::new(StringArray::from_iter_values(ids.clone().map(|i| i.to_string()))) as ArrayRef)
    } else {
        ("id", Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef)
    }];
    if let Some(value) = extra {
        columns.push(("extra", Arc::new(StringArray::from_iter_values(ids.clone().map(|_| value)))));
    }
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let range = PartitionRange {
        partition: 0,
        first: ids.start,
        last: ids.end - 1,
        expected: (ids.start > 0).then_some(ids.start),
    };
    let path = weir::tables::file::table_file("events", "t", "topic", &[range]);
    let mut sink = TableSink::new(catalog.store().scratch(&path), path, Default::default());
    sink.write("t", weir::plugin::frames::Frame { schema: batch.schema(), batches: vec![batch] }).unwrap();
    let written = sink.finish().unwrap().unwrap();
    let execution = Execution {
        id: 0,
        publisher: "events/p".into(),
        status: "committed".into(),
        rollover_reason: "messages".into(),
        rows_in: ids.end as u64 - ids.start as u64,
        rows_out: ids.end as u64 - ids.start as u64,
        dead_letters: 0,
        offsets: vec![range],
        table_version: None,
        started_at_ms: now_ms(),
        timings_ms: Timings::default(),
        plugin_log: json!([]),
        error: None,
    };
    let version = NewVersion {
        table: "t".into(),
        rows: written.files.iter().map(|f| f.rows).sum(),
        files: written.files,
        schema: written.schema,
        txns: vec![Txn { app_id: "events/p/topic/0".into(), version: ids.end }],
        partition_by: vec![],
        iceberg: None,
    };
    let committed = catalog.commit(&BatchCommit {
        collection: "events",
        publisher: "events/p",
        topic: "topic",
        version: Some(version),
        ranges: &[range],
        execution: &execution,
        dead_letters: &[],
        rerun: &[],
    })?;
    Ok(committed.1.unwrap())
}
