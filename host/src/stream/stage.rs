//! Staging: a failed attempt's batch, kept as parquet on local disk for its
//! retries, named from its source offsets so a replay of the same batch
//! writes the same name; and the table's file, written as the plugin's
//! output arrives (the files themselves are `tables::file`'s).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::catalog::{DataFile, PartitionRange};
use crate::plugin::OutputSink;
use crate::plugin::frames::Frame;
use crate::tables::file::{Kind, ParquetFile};
use crate::tables::stats::delta_stats;
use crate::tables::types::{TableTypes, delta_schema};

/// `staging/<collection>/<publisher>/<topic>/<partition>-<first>-<last>.parquet`, relative to the data directory.
pub fn staged_file(collection: &str, publisher: &str, topic: &str, range: &PartitionRange) -> PathBuf {
    Path::new("staging")
        .join(collection)
        .join(publisher)
        .join(topic)
        .join(format!("{}-{}-{}.parquet", range.partition, range.first, range.last))
}

/// A batch's output table, written as the plugin makes it (the worker's
/// [`OutputSink`]): a local file, opened at the first
/// write with that write's schema, as a Delta table can hold it ([`TableTypes`]).
pub struct TableSink {
    /// Where the file is written.
    local: PathBuf,
    /// Its key in the store, once stored.
    key: String,
    file: Option<(ParquetFile, TableTypes)>,
    rows: u64,
}

impl TableSink {
    /// A file written at `local`, to be stored under `key` (the store's scratch
    /// for it, [`crate::store::Store::scratch`]).
    pub fn new(local: PathBuf, key: String) -> Self {
        Self { local, key, file: None, rows: 0 }
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Finishes the file; `None`, and no file, when no rows were written.
    pub fn finish(self) -> anyhow::Result<Option<TableFile>> {
        let (file, types) = match self.file {
            Some(file) if self.rows > 0 => file,
            _ => return Ok(None),
        };
        let footer = file.finish()?;
        let size = std::fs::metadata(&self.local).with_context(|| format!("{}", self.local.display()))?.len();
        Ok(Some(TableFile {
            file: DataFile {
                path: self.key,
                size,
                rows: self.rows,
                stats: Some(delta_stats(&footer, types.written())),
            },
            schema: delta_schema(types.written()),
        }))
    }
}

/// A finished table file, and its columns as a Delta schema.
pub struct TableFile {
    pub file: DataFile,
    pub schema: serde_json::Value,
}

impl OutputSink for TableSink {
    fn write(&mut self, _table: &str, frame: Frame) -> anyhow::Result<()> {
        let (file, types) = match &mut self.file {
            Some(file) => file,
            None => {
                let types = TableTypes::new(&frame.schema)?;
                let file = ParquetFile::create(&self.local, types.written(), Kind::Table)?;
                self.file.insert((file, types))
            }
        };
        self.rows += frame.rows();
        let batches = frame.batches.into_iter().map(|b| types.cast(b)).collect::<anyhow::Result<Vec<_>>>()?;
        file.write(&batches)
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::DataType;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::tables::file::tests::rows;

    #[test]
    fn a_table_sink_makes_no_file_for_no_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = TableSink::new(dir.path().join("tables/c/t/part.parquet"), "tables/c/t/part.parquet".into());
        let empty = rows(0, 0);
        sink.write("t", Frame { schema: empty.schema(), batches: vec![empty] }).unwrap();
        assert_eq!(sink.rows(), 0);
        assert!(sink.finish().unwrap().is_none());
        assert_eq!(std::fs::read_dir(dir.path().join("tables/c/t")).unwrap().count(), 0);

        let mut sink = TableSink::new(dir.path().join("tables/c/t/part.parquet"), "tables/c/t/part.parquet".into());
        let some = rows(0, 3);
        sink.write("t", Frame { schema: some.schema(), batches: vec![some.clone(), some] }).unwrap();
        assert_eq!(sink.rows(), 6);
        let written = sink.finish().unwrap().unwrap();
        let on_disk = dir.path().join("tables/c/t/part.parquet");
        assert_eq!(written.file.path, "tables/c/t/part.parquet");
        assert_eq!((written.file.rows, written.file.size), (6, std::fs::metadata(&on_disk).unwrap().len()));
        let stats: serde_json::Value = serde_json::from_str(written.file.stats.as_deref().unwrap()).unwrap();
        assert_eq!((stats["numRecords"].as_u64(), stats["minValues"]["id"].as_i64()), (Some(6), Some(0)));
        // Written as a Delta table holds it: the millisecond column in microseconds.
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&on_disk).unwrap()).unwrap();
        let at = reader.schema().field_with_name("at").unwrap().data_type().clone();
        assert_eq!(at, DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("+00:00".into())));
        assert_eq!(written.schema["fields"][3]["type"], "timestamp");
    }
}
