//! Tables: what a table can hold (`types`, `evolve`), its Delta log
//! (`delta`), and reading committed versions through that log.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::json::ArrayWriter;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::catalog::{Catalog, CatalogError};
use crate::store::{Blob, Store};

pub mod delta;
pub mod evolve;
pub mod stats;
pub mod types;
pub mod vacuum;

use delta::ReplayError;

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("table `{0}` has no committed version yet")]
    Empty(String),
    #[error("table `{table}` has no version {version}: its latest is {latest}")]
    NoVersion { table: String, version: i64, latest: i64 },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("reading {path}: {detail}")]
    Read { path: String, detail: String },
    #[error("writing the export: {0}")]
    Write(String),
}

/// A table as of one version.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub version: i64,
    pub rows: u64,
    /// Their keys in the store, oldest first.
    pub files: Vec<String>,
}

/// The table `collection/table` as of `version` (default: the latest), read
/// through its Delta log, as any other reader would. The log is first brought
/// up to the catalog (it is written after each catalog commit, so it may lag
/// by a crash), so every version the catalog has committed can be read.
pub fn snapshot(
    catalog: &Catalog,
    collection: &str,
    table: &str,
    version: Option<i64>,
) -> Result<Snapshot, TableError> {
    if let Err(e) = delta::sync(catalog, collection, table) {
        tracing::warn!(table, error = %format!("{e:#}"), "bringing the Delta log up to the catalog");
    }
    let (store, dir) = (catalog.store(), delta::table_dir(collection, table));
    let state = match delta::replay(store, &dir, version) {
        // Delta version 0 is the table's creation; weir's versions start at 1.
        Ok(state) if state.version == 0 && version.is_none() => return Err(TableError::Empty(table.into())),
        Ok(state) if state.version == 0 => {
            let latest = delta::latest(store, &dir).ok().flatten().unwrap_or(0);
            return Err(TableError::NoVersion { table: table.into(), version: 0, latest });
        }
        Ok(state) => state,
        Err(ReplayError::NoLog) => return Err(TableError::Empty(table.into())),
        Err(ReplayError::NoVersion { version, latest }) => {
            return Err(TableError::NoVersion { table: table.into(), version, latest });
        }
        Err(ReplayError::Read(e)) => return Err(read_error(&store.location(&dir), format!("{e:#}"))),
    };
    Ok(Snapshot {
        version: state.version,
        rows: state.files.iter().map(|(_, rows)| rows).sum(),
        files: state.files.iter().map(|(path, _)| format!("{dir}/{path}")).collect(),
    })
}

fn read_error(path: &str, e: impl std::fmt::Display) -> TableError {
    TableError::Read { path: path.to_string(), detail: e.to_string() }
}

fn open(store: &Store, key: &str) -> Result<ParquetRecordBatchReaderBuilder<Blob>, TableError> {
    let blob = store.blob(key).map_err(|e| read_error(key, format!("{e:#}")))?;
    ParquetRecordBatchReaderBuilder::try_new(blob).map_err(|e| read_error(key, e))
}

/// Every batch of the snapshot, file after file.
fn batches<'a>(store: &'a Store, snapshot: &'a Snapshot) -> impl Iterator<Item = Result<RecordBatch, TableError>> + 'a {
    snapshot.files.iter().flat_map(move |path| {
        let batches: Box<dyn Iterator<Item = _>> =
            match open(store, path).and_then(|b| b.build().map_err(|e| read_error(path, e))) {
                Ok(reader) => Box::new(reader.map(move |b| b.map_err(|e| read_error(path, e)))),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
        batches
    })
}

/// The schema of the snapshot's newest file (a batch has every column of the
/// versions before it).
pub fn schema(store: &Store, snapshot: &Snapshot) -> Result<SchemaRef, TableError> {
    let newest = snapshot.files.last().ok_or_else(|| TableError::Write("the version has no files".into()))?;
    Ok(open(store, newest)?.schema().clone())
}

/// The snapshot's first `limit` rows, as JSON objects.
pub fn sample(store: &Store, snapshot: &Snapshot, limit: usize) -> Result<Vec<serde_json::Value>, TableError> {
    let mut writer = ArrayWriter::new(Vec::new());
    let mut taken = 0;
    for batch in batches(store, snapshot) {
        if taken >= limit {
            break;
        }
        let batch = batch?;
        let batch = batch.slice(0, batch.num_rows().min(limit - taken));
        taken += batch.num_rows();
        writer.write(&batch).map_err(|e| TableError::Write(e.to_string()))?;
    }
    writer.finish().map_err(|e| TableError::Write(e.to_string()))?;
    let json = writer.into_inner();
    if json.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&json).map_err(|e| TableError::Write(e.to_string()))
}

/// Writes the snapshot as one parquet file; returns the rows written.
pub fn export(store: &Store, snapshot: &Snapshot, out: impl Write + Send) -> Result<u64, TableError> {
    let props = WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())).build();
    let schema = export_schema(store, snapshot)?;
    let mut writer =
        ArrowWriter::try_new(out, schema.clone(), Some(props)).map_err(|e| TableError::Write(e.to_string()))?;
    let mut rows = 0;
    for batch in read_batches(store, snapshot, &schema) {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        writer.write(&batch).map_err(|e| TableError::Write(e.to_string()))?;
    }
    writer.close().map_err(|e| TableError::Write(e.to_string()))?;
    Ok(rows)
}

/// The newest file's schema; if an older file lacks one of its columns (the
/// table gained it later), that column as nullable.
pub(crate) fn export_schema(store: &Store, snapshot: &Snapshot) -> Result<SchemaRef, TableError> {
    let newest = schema(store, snapshot)?;
    let mut missing = std::collections::HashSet::new();
    for path in &snapshot.files {
        let file = open(store, path)?;
        let names: Vec<&str> = file.schema().fields().iter().map(|f| f.name().as_str()).collect();
        missing
            .extend(newest.fields().iter().filter(|f| !names.contains(&f.name().as_str())).map(|f| f.name().clone()));
    }
    if missing.is_empty() {
        return Ok(newest);
    }
    let fields: Vec<arrow::datatypes::FieldRef> = newest
        .fields()
        .iter()
        .map(|f| {
            if missing.contains(f.name()) {
                std::sync::Arc::new(f.as_ref().clone().with_nullable(true))
            } else {
                f.clone()
            }
        })
        .collect();
    Ok(std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, newest.metadata().clone())))
}

/// Every batch of the snapshot, file after file, with `schema`'s columns.
pub(crate) fn read_batches<'a>(
    store: &'a Store,
    snapshot: &'a Snapshot,
    schema: &'a SchemaRef,
) -> impl Iterator<Item = Result<RecordBatch, TableError>> + 'a {
    batches(store, snapshot).map(|batch| conform(batch?, schema).map_err(|e| TableError::Write(e.to_string())))
}

/// `batch` with `schema`'s columns: a file from before the table gained a
/// column reads it as nulls, as every Delta reader does.
fn conform(batch: RecordBatch, schema: &SchemaRef) -> arrow::error::Result<RecordBatch> {
    if batch.schema() == *schema {
        return Ok(batch);
    }
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) if column.data_type() == field.data_type() => Ok(column.clone()),
            Some(column) => arrow::compute::cast(column, field.data_type()),
            None => Ok(arrow::array::new_null_array(field.data_type(), batch.num_rows())),
        })
        .collect::<arrow::error::Result<Vec<_>>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}
