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
    staged(catalog, ids, extra, id_type_string).commit(catalog, false)
}

/// A version of `events/t` written and ready to commit.
pub struct Staged {
    version: NewVersion,
    range: PartitionRange,
    execution: Execution,
}

impl Staged {
    /// Commits it (with Iceberg metadata when `iceberg`), as a worker does; returns its number.
    pub fn commit(self, catalog: &Catalog, iceberg: bool) -> Result<i64, CatalogError> {
        let mut batch = BatchCommit {
            collection: "events",
            publisher: "events/p",
            topic: "topic",
            versions: vec![self.version],
            ranges: &[self.range],
            execution: &self.execution,
            dead_letters: &[],
            rerun: &[],
        };
        let committed = weir::tables::iceberg::commit(catalog, &mut batch, iceberg).expect("Iceberg metadata")?;
        Ok(committed.1.unwrap())
    }
}

/// Writes the file of a version of `events/t` with rows `ids` ([`commit_version`]).
pub fn staged(catalog: &Catalog, ids: std::ops::Range<i64>, extra: Option<&str>, id_type_string: bool) -> Staged {
    let mut columns: Vec<(&str, ArrayRef)> = vec![if id_type_string {
        ("id", Arc::new(StringArray::from_iter_values(ids.clone().map(|i| i.to_string()))) as ArrayRef)
    } else {
        ("id", Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef)
    }];
    if let Some(value) = extra {
        columns.push(("extra", Arc::new(StringArray::from_iter_values(ids.clone().map(|_| value)))));
    }
    stage(catalog, "t", RecordBatch::try_from_iter(columns).unwrap(), ids.start, &[])
}

/// Writes `batch` as the file (or a file a partition) of the next version of
/// `events/{table}`, partition 0's offsets `first` on, the table partitioned by `partition_by`.
pub fn stage(catalog: &Catalog, table: &str, batch: RecordBatch, first: i64, partition_by: &[String]) -> Staged {
    let rows = batch.num_rows() as i64;
    let range = PartitionRange { partition: 0, first, last: first + rows - 1, expected: (first > 0).then_some(first) };
    let path = weir::tables::file::table_file("events", table, "topic", &[range]);
    let spec = weir::tables::partition::PartitionSpec::parse(partition_by).unwrap();
    let partitioning = weir::tables::partition::Partitioning { spec, ..Default::default() };
    let mut sink = TableSink::new(catalog.store().scratch(&path), path, partitioning);
    sink.write(table, weir::plugin::frames::Frame { schema: batch.schema(), batches: vec![batch] }).unwrap();
    let written = sink.finish().unwrap().unwrap();
    let execution = Execution {
        id: 0,
        publisher: "events/p".into(),
        status: "committed".into(),
        rollover_reason: "messages".into(),
        rows_in: rows as u64,
        rows_out: rows as u64,
        dead_letters: 0,
        offsets: vec![range],
        table_version: None,
        started_at_ms: now_ms(),
        timings_ms: Timings::default(),
        plugin_log: json!([]),
        error: None,
    };
    let version = NewVersion {
        table: table.into(),
        rows: written.files.iter().map(|f| f.rows).sum(),
        files: written.files,
        schema: written.schema,
        txns: vec![Txn { app_id: "events/p/topic/0".into(), version: first + rows }],
        partition_by: partition_by.to_vec(),
        iceberg: None,
    };
    Staged { version, range, execution }
}
