//! Tables: what a table can hold (`types`; `catalog::evolve` says how it may change), its Delta log
//! (`delta`), and reading committed versions through that log.

use std::collections::HashMap;
use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::json::ArrayWriter;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::catalog::{Catalog, CatalogError};
use crate::store::{Blob, Store};

pub mod delta;

pub mod file;
pub mod iceberg;
pub mod partition;
pub mod stats;
pub mod types;
pub mod vacuum;

use delta::ReplayError;
use partition::PartitionValues;

/// What a table's metadata is written as: a Delta log (the default), or
/// Iceberg metadata beside it (`table_format = "iceberg"`, `tables::iceberg`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableFormat {
    #[default]
    Delta,
    Iceberg,
}

impl TableFormat {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "delta" => Ok(Self::Delta),
            "iceberg" => Ok(Self::Iceberg),
            other => Err(format!("table_format must be \"delta\" or \"iceberg\", not {other:?}")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delta => "delta",
            Self::Iceberg => "iceberg",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("table `{0}` has no committed version yet")]
    Empty(String),
    #[error("table `{table}` has no version {version}: {}", if *version == 0 {
        format!("version 0 is the table's creation in its Delta log (its columns, no rows), and weir's versions start at 1 (its latest is {latest})")
    } else {
        format!("its latest is {latest}")
    })]
    NoVersion { table: String, version: i64, latest: i64 },
    /// Committed, but the log does not hold it yet: no reader sees it.
    #[error("version {version} of table `{table}` is committed but not yet in its Delta log{cause}")]
    Unlogged { table: String, version: i64, cause: String },
    /// Another writer deleted rows through deletion vectors, which weir does not read.
    #[error(
        "table `{table}` at Delta version {delta_version}: another writer deleted rows of {path} with a deletion vector, which weir cannot read yet; read the table with DuckDB, Polars or deltalake, or rewrite the file without it (deltalake: optimize.compact())"
    )]
    DeletionVectors { table: String, delta_version: i64, path: String },
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
    /// weir's version: the newest the Delta version holds.
    pub version: i64,
    /// The Delta version read (it may hold other writers' commits too).
    pub delta_version: i64,
    pub rows: u64,
    /// Oldest first.
    pub files: Vec<SnapshotFile>,
    /// The types of the table's partition columns (none: not partitioned).
    pub partition_types: HashMap<String, DataType>,
}

/// A file a snapshot reads.
#[derive(Debug, Clone)]
pub struct SnapshotFile {
    /// Its key in the store.
    pub key: String,
    /// Its partition's values (a partitioned table's files lack those columns).
    pub partition_values: PartitionValues,
    /// Its size in bytes and its rows, as its `add` action says (0: it does not say).
    pub size: u64,
    pub rows: u64,
}

/// The table `collection/table` as of weir's version `version` (default: the
/// log's latest, whoever wrote it), read through its Delta log, as any other
/// reader would: another writer's compaction is read once, its deletes stay
/// deleted. The log is first brought up to the catalog (it is written after
/// each catalog commit, so it may lag by a crash).
pub fn snapshot(
    catalog: &Catalog,
    collection: &str,
    table: &str,
    version: Option<i64>,
) -> Result<Snapshot, TableError> {
    let synced = delta::sync(catalog, collection, table);
    if let Err(e) = &synced {
        tracing::warn!(table, error = %format!("{e:#}"), "bringing the Delta log up to the catalog");
    }
    let no_version = |version| -> Result<Snapshot, TableError> {
        let latest = catalog.version_at(collection, table, i64::MAX)?.unwrap_or(0);
        Err(TableError::NoVersion { table: table.into(), version, latest })
    };
    let delta_version = match version {
        None => None,
        Some(v) => match catalog.delta_version_of(collection, table, v)? {
            Some(Some(d)) => Some(d),
            Some(None) => {
                let cause = synced.err().map_or(String::new(), |e| format!(": {e:#}"));
                return Err(TableError::Unlogged { table: table.into(), version: v, cause });
            }
            None => return no_version(v),
        },
    };
    let (store, dir) = (catalog.store(), delta::table_dir(collection, table));
    // A Delta version never changes once written: read its log once.
    let delta_version = match delta_version {
        Some(v) => Some(v),
        None => delta::latest(store, &dir).ok().flatten(),
    };
    let key = match (catalog.table_record(collection, table)?, delta_version) {
        (Some(record), Some(v)) => Some((format!("{}#{}", store.location(&dir), record.delta_id), v)),
        _ => None,
    };
    if let Some(hit) = key.as_ref().and_then(|(table, v)| kept(table, *v)) {
        return Ok(hit);
    }
    let state = match delta::replay(store, &dir, delta_version) {
        // Delta version 0 is the table's creation; weir's versions start at 1.
        Ok(state) if state.version() == 0 && version.is_none() => return Err(TableError::Empty(table.into())),
        Ok(state) => state,
        Err(ReplayError::NoLog) => return Err(TableError::Empty(table.into())),
        Err(ReplayError::NoVersion { .. }) => return no_version(version.unwrap_or(0)),
        Err(ReplayError::Read(e)) => return Err(read_error(&store.location(&dir), format!("{e:#}"))),
    };
    let deleted = state.files.iter().find(|f| f.add.get("deletionVector").is_some_and(|d| !d.is_null()));
    if let Some(file) = deleted {
        return Err(TableError::DeletionVectors {
            table: table.into(),
            delta_version: state.version(),
            path: file.path.clone(),
        });
    }
    let metadata = state.head.metadata.as_ref();
    let partition_columns: Vec<String> = metadata
        .and_then(|m| m["partitionColumns"].as_array())
        .map(|p| p.iter().filter_map(|c| c.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let schema = state.head.schema();
    let partition_types = partition_columns
        .iter()
        .filter_map(|c| {
            let field = schema.as_ref()?["fields"].as_array()?.iter().find(|f| f["name"] == **c)?;
            Some((c.clone(), partition::arrow_type(field["type"].as_str()?)?))
        })
        .collect();
    let files = state
        .files
        .iter()
        .map(|f| SnapshotFile {
            key: format!("{dir}/{}", f.path),
            partition_values: partition_columns
                .iter()
                .map(|c| (c.clone(), f.add["partitionValues"][c].as_str().map(str::to_string)))
                .collect(),
            size: f.add["size"].as_u64().unwrap_or(0),
            rows: f.rows,
        })
        .collect();
    let snapshot = Snapshot {
        version: catalog.version_at(collection, table, state.version())?.unwrap_or(0),
        delta_version: state.version(),
        rows: state.files.iter().map(|f| f.rows).sum(),
        files,
        partition_types,
    };
    if let Some((table, _)) = key {
        keep(table, snapshot.clone());
    }
    Ok(snapshot)
}

/// The snapshots read last, newest last, by the table's location and Delta id
/// and by Delta version: a page that asks a table for its summary, schema,
/// rows and files replays its log once.
static KEPT: std::sync::Mutex<std::collections::VecDeque<(String, Snapshot)>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());
const KEPT_SNAPSHOTS: usize = 16;
const KEPT_FILES: usize = 100_000;

fn kept(table: &str, delta_version: i64) -> Option<Snapshot> {
    let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    kept.iter().rev().find(|(t, s)| t == table && s.delta_version == delta_version).map(|(_, s)| s.clone())
}

fn keep(table: String, snapshot: Snapshot) {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    kept.retain(|(t, s)| !(*t == table && s.delta_version == snapshot.delta_version));
    kept.push_back((table, snapshot));
    // A few, and not too many files in all (a table of a million files is kept alone).
    while kept.len() > KEPT_SNAPSHOTS
        || (kept.len() > 1 && kept.iter().map(|(_, s)| s.files.len()).sum::<usize>() > KEPT_FILES)
    {
        kept.pop_front();
    }
}

fn read_error(path: &str, e: impl std::fmt::Display) -> TableError {
    TableError::Read { path: path.to_string(), detail: e.to_string() }
}

fn open(store: &Store, key: &str) -> Result<ParquetRecordBatchReaderBuilder<Blob>, TableError> {
    let blob = store.blob(key).map_err(|e| read_error(key, format!("{e:#}")))?;
    ParquetRecordBatchReaderBuilder::try_new(blob).map_err(|e| read_error(key, e))
}

/// Every batch of the snapshot, file after file (with its partition's columns).
fn batches<'a>(store: &'a Store, snapshot: &'a Snapshot) -> impl Iterator<Item = Result<RecordBatch, TableError>> + 'a {
    snapshot.files.iter().flat_map(move |file| {
        let path = &file.key;
        let batches: Box<dyn Iterator<Item = _>> =
            match open(store, path).and_then(|b| b.build().map_err(|e| read_error(path, e))) {
                Ok(reader) => Box::new(reader.map(move |b| {
                    let b = b.map_err(|e| read_error(path, e))?;
                    with_partition(snapshot, file, b).map(utc_offsets)
                })),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
        batches
    })
}

/// `batch`, read from `file`, with the columns of its partition.
fn with_partition(snapshot: &Snapshot, file: &SnapshotFile, batch: RecordBatch) -> Result<RecordBatch, TableError> {
    let types = |c: &str| snapshot.partition_types.get(c).cloned();
    partition::with_values(batch, &file.partition_values, &types).map_err(|e| read_error(&file.key, format!("{e:#}")))
}

/// `batch` with its timestamps' zones as UTC offsets. A Delta `timestamp` is
/// an instant in UTC whatever zone name its file's writer gave it (another
/// engine's files say "UTC", weir's "+00:00"), and arrow formats and casts
/// only offsets without a time zone database.
fn utc_offsets(batch: RecordBatch) -> RecordBatch {
    use arrow::datatypes::{DataType, Field, Schema};
    let named = |t: &DataType| matches!(t, DataType::Timestamp(_, Some(tz)) if !tz.starts_with(['+', '-']));
    if !batch.schema().fields().iter().any(|f| named(f.data_type())) {
        return batch;
    }
    let (mut fields, mut columns) = (Vec::new(), Vec::new());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        match field.data_type() {
            DataType::Timestamp(unit, Some(_)) if named(field.data_type()) => {
                let utc = DataType::Timestamp(*unit, Some("+00:00".into()));
                let data = column.to_data().into_builder().data_type(utc.clone()).build();
                fields.push(Field::new(field.name(), utc, field.is_nullable()).with_metadata(field.metadata().clone()));
                columns.push(arrow::array::make_array(data.expect("the same values, another zone's name")));
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(column.clone());
            }
        }
    }
    let schema = std::sync::Arc::new(Schema::new_with_metadata(fields, batch.schema().metadata().clone()));
    RecordBatch::try_new(schema, columns).expect("the same columns")
}

/// The schema of the snapshot's newest file (a batch has every column of the
/// versions before it).
pub fn schema(store: &Store, snapshot: &Snapshot) -> Result<SchemaRef, TableError> {
    let newest = snapshot.files.last().ok_or_else(|| TableError::Write("the version has no files".into()))?;
    let schema = open(store, &newest.key)?.schema().clone();
    Ok(utc_offsets(with_partition(snapshot, newest, RecordBatch::new_empty(schema))?).schema())
}

/// The snapshot's rows from `offset` on, `limit` of them, as JSON objects.
/// The files wholly before `offset` are not read: the log gives their rows.
pub fn sample(
    store: &Store,
    snapshot: &Snapshot,
    offset: usize,
    limit: usize,
) -> Result<Vec<serde_json::Value>, TableError> {
    let (mut skip, mut first) = (offset, 0);
    while let Some(file) = snapshot.files.get(first).filter(|f| f.rows > 0 && f.rows as usize <= skip) {
        skip -= file.rows as usize;
        first += 1;
    }
    let rest = Snapshot { files: snapshot.files[first..].to_vec(), ..snapshot.clone() };
    let mut writer = ArrayWriter::new(Vec::new());
    let mut taken = 0;
    for batch in batches(store, &rest) {
        if taken >= limit {
            break;
        }
        let batch = batch?;
        let skipped = skip.min(batch.num_rows());
        skip -= skipped;
        let batch = batch.slice(skipped, (batch.num_rows() - skipped).min(limit - taken));
        if batch.num_rows() == 0 {
            continue;
        }
        taken += batch.num_rows();
        writer.write(&as_text(batch)).map_err(|e| TableError::Write(e.to_string()))?;
    }
    writer.finish().map_err(|e| TableError::Write(e.to_string()))?;
    let json = writer.into_inner();
    if json.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&json).map_err(|e| TableError::Write(e.to_string()))
}

/// `batch` with its binary columns as text where every value is UTF-8 (a
/// key `2` reads `"2"`, not its hex `"32"`), for people to read.
fn as_text(batch: RecordBatch) -> RecordBatch {
    use arrow::array::{Array, AsArray, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    let mut changed = false;
    let (fields, columns): (Vec<Field>, Vec<arrow::array::ArrayRef>) = batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            let text = (column.data_type() == &DataType::Binary)
                .then(|| StringArray::try_from_binary(column.as_binary::<i32>().clone()).ok())
                .flatten();
            match text {
                Some(text) => {
                    changed = true;
                    let field = Field::new(field.name(), DataType::Utf8, field.is_nullable());
                    (field, std::sync::Arc::new(text) as arrow::array::ArrayRef)
                }
                None => (field.as_ref().clone(), column.clone()),
            }
        })
        .unzip();
    if !changed {
        return batch;
    }
    let schema = std::sync::Arc::new(Schema::new_with_metadata(fields, batch.schema().metadata().clone()));
    RecordBatch::try_new(schema, columns).expect("the same columns, as text")
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
        let file = open(store, &path.key)?;
        let partition = path.partition_values.iter().map(|(c, _)| c.as_str());
        let names: Vec<&str> = file.schema().fields().iter().map(|f| f.name().as_str()).chain(partition).collect();
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
