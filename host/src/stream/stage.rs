//! Staging: a failed attempt's batch, kept as parquet on local disk for its
//! retries, named from its source offsets so a replay of the same batch
//! writes the same name; and the table's file, written as the plugin's
//! output arrives (the files themselves are `tables::file`'s).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use std::collections::HashMap;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::catalog::{BatchCommit, Catalog, CatalogError, DataFile, Execution, NewVersion, PartitionRange, Txn};
use crate::formats::DeadLetter;
use crate::plugin::OutputSink;
use crate::plugin::frames::Frame;
use crate::tables;
use crate::tables::file::{Kind, ParquetFile};
use crate::tables::partition::{self, PartitionValues, Partitioning};
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
/// [`OutputSink`]): local files, the first opened at the first write with
/// that write's schema, as a Delta table can hold it ([`TableTypes`]); one
/// file, or one for each partition value of a partitioned table (under its
/// directory, [`partition::directory`]).
pub struct TableSink {
    /// Where the (first) file is written, and its key in the store once stored.
    local: PathBuf,
    key: String,
    partitioning: Partitioning,
    open: Option<Open>,
    rows: u64,
}

/// The files a sink has open, once it knows the output's columns.
struct Open {
    types: TableTypes,
    /// The files, in the order their partitions first came; the index by partition directory.
    files: Vec<PartFile>,
    index: HashMap<String, usize>,
}

struct PartFile {
    values: PartitionValues,
    local: PathBuf,
    key: String,
    file: ParquetFile,
    /// The columns written to it (a partitioned table's files lack its partition columns).
    schema: SchemaRef,
    rows: u64,
}

/// How many of a batch's files finish at once.
const FINISHING_AT_ONCE: usize = 8;

impl PartFile {
    fn finish(self) -> anyhow::Result<DataFile> {
        let footer = self.file.finish()?;
        let size = std::fs::metadata(&self.local).with_context(|| format!("{}", self.local.display()))?.len();
        Ok(DataFile {
            path: self.key,
            size,
            rows: self.rows,
            stats: Some(delta_stats(&footer, &self.schema)),
            partition_values: self.values,
        })
    }
}

impl TableSink {
    /// Files written at `local`, to be stored under `key` (the store's scratch
    /// for it, [`crate::store::Store::scratch`]); a partition's in its
    /// directory beside them, under the same name.
    pub fn new(local: PathBuf, key: String, partitioning: Partitioning) -> Self {
        Self { local, key, partitioning, open: None, rows: 0 }
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Finishes the files; `None`, and no file, when no rows were written.
    pub fn finish(self) -> anyhow::Result<Option<TableFiles>> {
        let open = match self.open {
            Some(open) if self.rows > 0 => open,
            _ => return Ok(None),
        };
        let mut columns = open.types.written().clone();
        // An empty file is dropped (and deleted); a partitioned batch's files
        // finish at once: their last row groups encode side by side, their syncs overlap.
        let parts: Vec<PartFile> = open.files.into_iter().filter(|p| p.rows > 0).collect();
        let files = crate::parallel::map(parts, FINISHING_AT_ONCE, PartFile::finish)?;
        if !self.partitioning.spec.is_empty() {
            let empty = RecordBatch::new_empty(columns.clone());
            columns = self.partitioning.spec.derive(&empty)?.schema();
        }
        Ok(Some(TableFiles { files, schema: delta_schema(&columns) }))
    }

    /// Where the file of the partition with `values` goes: its key, and its local path.
    fn place(&self, values: &PartitionValues) -> (String, PathBuf) {
        if values.is_empty() {
            return (self.key.clone(), self.local.clone());
        }
        let dir = partition::directory(values);
        let name = self.local.file_name().expect("a file");
        (partition::file_key(&self.key, values), self.local.parent().expect("inside a directory").join(dir).join(name))
    }
}

/// A batch's finished files, and the table's columns as a Delta schema
/// (a partitioned table's with its partition columns, which its files lack).
pub struct TableFiles {
    pub files: Vec<DataFile>,
    pub schema: serde_json::Value,
}

impl TableFiles {
    /// Stores the files, once the table's log can take them as its next
    /// version ([`tables::delta::ready`]); not taken, they are removed.
    /// Stored before the commit that names them: nothing is committed without its files.
    pub fn store(&self, catalog: &Catalog, collection: &str, table: &str) -> anyhow::Result<()> {
        if let Err(e) = tables::delta::ready(catalog, collection, table, &self.schema) {
            for file in &self.files {
                let _ = std::fs::remove_file(catalog.store().scratch(&file.path));
            }
            return Err(e);
        }
        let store = catalog.store();
        crate::parallel::map(self.files.iter().collect(), FINISHING_AT_ONCE, |f| store.upload(&f.path))?;
        Ok(())
    }

    /// Deletes the stored files of a commit that failed: their names are
    /// this attempt's alone, nothing else will ever use them.
    pub fn delete(keys: &[String], store: &crate::store::Store) {
        for key in keys {
            let _ = store.delete(key);
        }
    }
}

/// A batch's output tables, a [`TableSink`] each (an [`OutputSink`] that
/// hands each table's rows to its own), committed together:
/// [`TableSinks::commit`].
pub struct TableSinks {
    sinks: Vec<(String, TableSink)>,
}

/// What a batch commits besides its tables' files (see [`BatchCommit`]).
pub struct Commit<'a> {
    pub collection: &'a str,
    pub publisher: &'a str,
    pub topic: &'a str,
    pub ranges: &'a [PartitionRange],
    pub execution: &'a Execution,
    pub dead_letters: &'a [DeadLetter],
    pub rerun: &'a [(i32, i64)],
    /// Where the batch's source resumes, as Delta transaction ids of each version.
    pub txns: Vec<Txn>,
    pub partition_by: Vec<String>,
    /// Iceberg metadata is made for each version too.
    pub iceberg: bool,
}

impl TableSinks {
    /// A sink for each table, by name.
    pub fn new(sinks: Vec<(String, TableSink)>) -> Self {
        Self { sinks }
    }

    /// Rows written, all tables together.
    pub fn rows(&self) -> u64 {
        self.sinks.iter().map(|(_, s)| s.rows()).sum()
    }

    /// Finishes and stores each table's files, then commits them as a version
    /// of each table that has rows, in one catalog transaction with the rest
    /// of `commit`; the stored files are deleted again when it does not commit.
    pub fn commit(
        self,
        catalog: &Catalog,
        commit: Commit<'_>,
    ) -> anyhow::Result<Result<(i64, Option<i64>), CatalogError>> {
        let (mut versions, mut keys) = (Vec::new(), Vec::new());
        let stored = self.sinks.into_iter().try_for_each(|(table, sink)| -> anyhow::Result<()> {
            let rows = sink.rows();
            let Some(written) = sink.finish()? else { return Ok(()) };
            // The table's log must be able to take the version (other engines write it too).
            written.store(catalog, commit.collection, &table)?;
            keys.extend(written.files.iter().map(|f| f.path.clone()));
            versions.push(NewVersion {
                table,
                files: written.files,
                rows,
                schema: written.schema,
                txns: commit.txns.clone(),
                partition_by: commit.partition_by.clone(),
                iceberg: None,
            });
            Ok(())
        });
        if let Err(e) = stored {
            TableFiles::delete(&keys, catalog.store());
            return Err(e);
        }
        let mut batch = BatchCommit {
            collection: commit.collection,
            publisher: commit.publisher,
            topic: commit.topic,
            versions,
            ranges: commit.ranges,
            execution: commit.execution,
            dead_letters: commit.dead_letters,
            rerun: commit.rerun,
        };
        let committed = tables::iceberg::commit(catalog, &mut batch, commit.iceberg);
        if !matches!(committed, Ok(Ok(_))) {
            TableFiles::delete(&keys, catalog.store());
        }
        committed
    }
}

impl OutputSink for TableSinks {
    fn write(&mut self, table: &str, frame: Frame) -> anyhow::Result<()> {
        match self.sinks.iter_mut().find(|(name, _)| name == table) {
            Some((_, sink)) => sink.write(table, frame),
            None => anyhow::bail!("the plugin wrote table {table:?}, which its publisher does not declare"),
        }
    }
}

impl OutputSink for TableSink {
    fn write(&mut self, _table: &str, frame: Frame) -> anyhow::Result<()> {
        if self.open.is_none() {
            let types = TableTypes::new(&frame.schema)?;
            if !self.partitioning.spec.is_empty() {
                self.partitioning.spec.check(types.written()).map_err(|e| {
                    anyhow::anyhow!("{e}: the plugin's output must have the columns its publisher's partition_by names")
                })?;
            }
            self.open = Some(Open { types, files: Vec::new(), index: HashMap::new() });
        }
        self.rows += frame.rows();
        for batch in frame.batches {
            let open = self.open.as_ref().expect("opened");
            let batch = open.types.cast(batch)?;
            let parts = match self.partitioning.spec.is_empty() {
                true => vec![(PartitionValues::new(), batch)],
                false => self.partitioning.spec.split(&self.partitioning.spec.derive(&batch)?)?,
            };
            for (values, rows) in parts {
                let dir = partition::directory(&values);
                let at = match self.open.as_ref().expect("opened").index.get(&dir) {
                    Some(&at) => at,
                    None => {
                        let open = self.open.as_ref().expect("opened");
                        if open.files.len() >= self.partitioning.max_per_batch {
                            anyhow::bail!(
                                "the batch writes more than {} partitions of the table (partition_by = {:?}; the next is {dir}): nothing was committed. Partition more coarsely (day instead of hour, bucket(N, col) or truncate(W, col) of a column of many values), or raise max_partitions_per_batch (at most {})",
                                self.partitioning.max_per_batch,
                                self.partitioning.spec.texts(),
                                partition::MAX_PARTITIONS_LIMIT
                            );
                        }
                        let (key, local) = self.place(&values);
                        let file = ParquetFile::create(&local, &rows.schema(), Kind::Table)?;
                        let part = PartFile { values, local, key, file, schema: rows.schema(), rows: 0 };
                        let open = self.open.as_mut().expect("opened");
                        open.files.push(part);
                        open.index.insert(dir, open.files.len() - 1);
                        open.files.len() - 1
                    }
                };
                let part = &mut self.open.as_mut().expect("opened").files[at];
                part.rows += rows.num_rows() as u64;
                part.file.write(&[rows])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::DataType;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::tables::file::tests::rows;
    use crate::tables::partition::PartitionSpec;

    #[test]
    fn a_table_sink_makes_no_file_for_no_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = TableSink::new(
            dir.path().join("tables/c/t/part.parquet"),
            "tables/c/t/part.parquet".into(),
            Default::default(),
        );
        let empty = rows(0, 0);
        sink.write("t", Frame { schema: empty.schema(), batches: vec![empty] }).unwrap();
        assert_eq!(sink.rows(), 0);
        assert!(sink.finish().unwrap().is_none());
        assert_eq!(std::fs::read_dir(dir.path().join("tables/c/t")).unwrap().count(), 0);

        let mut sink = TableSink::new(
            dir.path().join("tables/c/t/part.parquet"),
            "tables/c/t/part.parquet".into(),
            Default::default(),
        );
        let some = rows(0, 3);
        sink.write("t", Frame { schema: some.schema(), batches: vec![some.clone(), some] }).unwrap();
        assert_eq!(sink.rows(), 6);
        let written = sink.finish().unwrap().unwrap();
        let on_disk = dir.path().join("tables/c/t/part.parquet");
        let [file] = &written.files[..] else { panic!("one file: {:?}", written.files) };
        assert_eq!(file.path, "tables/c/t/part.parquet");
        assert_eq!((file.rows, file.size), (6, std::fs::metadata(&on_disk).unwrap().len()));
        let stats: serde_json::Value = serde_json::from_str(file.stats.as_deref().unwrap()).unwrap();
        assert_eq!((stats["numRecords"].as_u64(), stats["minValues"]["id"].as_i64()), (Some(6), Some(0)));
        // Written as a Delta table holds it: the millisecond column in microseconds.
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&on_disk).unwrap()).unwrap();
        let at = reader.schema().field_with_name("at").unwrap().data_type().clone();
        assert_eq!(at, DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("+00:00".into())));
        assert_eq!(written.schema["fields"][3]["type"], "timestamp");
    }

    #[test]
    fn a_partitioned_sink_writes_a_file_per_partition_without_its_columns_and_stops_past_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let spec = PartitionSpec::parse(&["name".into(), "truncate(4, id)".into()]).unwrap();
        let sink = |max_per_batch| {
            let partitioning = Partitioning { spec: spec.clone(), max_per_batch };
            TableSink::new(dir.path().join("tables/c/t/part.parquet"), "tables/c/t/part.parquet".into(), partitioning)
        };
        let (mut six, batch) = (sink(100), rows(0, 6));
        six.write("t", Frame { schema: batch.schema(), batches: vec![batch] }).unwrap();
        let written = six.finish().unwrap().unwrap();
        let keys: Vec<&str> = written.files.iter().map(|f| f.path.as_str()).collect();
        // Names n1, n2, n4, n5 and two nulls (ids 0 and 3); ids 0–3 and 4–5.
        assert_eq!(
            keys,
            [
                "tables/c/t/name=__HIVE_DEFAULT_PARTITION__/id_trunc=0/part.parquet",
                "tables/c/t/name=n1/id_trunc=0/part.parquet",
                "tables/c/t/name=n2/id_trunc=0/part.parquet",
                "tables/c/t/name=n4/id_trunc=4/part.parquet",
                "tables/c/t/name=n5/id_trunc=4/part.parquet",
            ]
        );
        assert_eq!(written.files[0].rows, 2);
        assert_eq!(
            written.files[1].partition_values,
            [("name".into(), Some("n1".into())), ("id_trunc".into(), Some("0".into()))]
        );
        let file = std::fs::File::open(dir.path().join(keys[1])).unwrap();
        let columns: Vec<String> = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(columns, ["id", "page", "at"], "the partition columns are the log's, not the file's");
        let names: Vec<&str> =
            written.schema["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["id", "name", "page", "at", "id_trunc"]);

        let (mut bounded, batch) = (sink(3), rows(10, 6));
        let error = bounded.write("t", Frame { schema: batch.schema(), batches: vec![batch] }).unwrap_err().to_string();
        assert!(error.starts_with("the batch writes more than 3 partitions of the table"), "{error}");
    }
}
