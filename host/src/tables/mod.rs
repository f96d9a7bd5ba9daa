//! Reading committed tables. Versions are appends: the table as of version N
//! is every file of versions 1..=N, in order.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::json::ArrayWriter;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::catalog::{Catalog, CatalogError};

pub mod evolve;
pub mod stats;
pub mod types;

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("table `{0}` has no committed version yet")]
    Empty(String),
    #[error("table `{table}` has no version {version}: its latest is {latest}")]
    NoVersion { table: String, version: i64, latest: i64 },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("reading {path}: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("writing the export: {0}")]
    Write(String),
}

/// A table as of one version.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub version: i64,
    pub rows: u64,
    /// Absolute paths, oldest first.
    pub files: Vec<PathBuf>,
}

/// The table `collection/table` as of `version` (default: the latest).
pub fn snapshot(
    catalog: &Catalog,
    collection: &str,
    table: &str,
    version: Option<i64>,
) -> Result<Snapshot, TableError> {
    let versions = catalog.versions(collection, table)?;
    let latest = versions.last().ok_or_else(|| TableError::Empty(table.into()))?.version;
    let version = version.unwrap_or(latest);
    if !versions.iter().any(|v| v.version == version) {
        return Err(TableError::NoVersion { table: table.into(), version, latest });
    }
    let upto = versions.iter().take_while(|v| v.version <= version);
    Ok(Snapshot {
        version,
        rows: upto.clone().map(|v| v.rows).sum(),
        files: upto.flat_map(|v| v.files.iter().map(|f| catalog.data_dir().join(f))).collect(),
    })
}

fn read_error(path: &Path, e: impl std::fmt::Display) -> TableError {
    TableError::Read { path: path.to_path_buf(), detail: e.to_string() }
}

fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, TableError> {
    let file = File::open(path).map_err(|e| read_error(path, e))?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| read_error(path, e))
}

/// Every batch of the snapshot, file after file.
fn batches(snapshot: &Snapshot) -> impl Iterator<Item = Result<RecordBatch, TableError>> + '_ {
    snapshot.files.iter().flat_map(|path| {
        let batches: Box<dyn Iterator<Item = _>> =
            match open(path).and_then(|b| b.build().map_err(|e| read_error(path, e))) {
                Ok(reader) => Box::new(reader.map(move |b| b.map_err(|e| read_error(path, e)))),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
        batches
    })
}

/// The schema of the snapshot's newest file.
pub fn schema(snapshot: &Snapshot) -> Result<SchemaRef, TableError> {
    let newest = snapshot.files.last().expect("a committed version has files");
    Ok(open(newest)?.schema().clone())
}

/// The snapshot's first `limit` rows, as JSON objects.
pub fn sample(snapshot: &Snapshot, limit: usize) -> Result<Vec<serde_json::Value>, TableError> {
    let mut writer = ArrayWriter::new(Vec::new());
    let mut taken = 0;
    for batch in batches(snapshot) {
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
pub fn export(snapshot: &Snapshot, out: impl Write + Send) -> Result<u64, TableError> {
    let props = WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())).build();
    let mut writer =
        ArrowWriter::try_new(out, schema(snapshot)?, Some(props)).map_err(|e| TableError::Write(e.to_string()))?;
    let mut rows = 0;
    for batch in batches(snapshot) {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        writer.write(&batch).map_err(|e| TableError::Write(e.to_string()))?;
    }
    writer.close().map_err(|e| TableError::Write(e.to_string()))?;
    Ok(rows)
}
