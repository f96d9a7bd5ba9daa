//! Each table's Delta transaction log, written from the catalog.
//!
//! weir version N is Delta version N. Version 0 creates the table (protocol
//! and metadata, from version 1's columns); version N adds its files, one
//! `txn` per partition it read (the partition's next offset) and a
//! `commitInfo` naming its execution, with the new columns' metadata when it
//! adds some. The catalog is the commit point: a Delta commit is written only
//! after the catalog has the version, put-if-absent, and its bytes are a pure
//! function of the catalog's rows, so writing it again, after a crash or from
//! two places at once, changes nothing. [`sync`] writes whatever the catalog
//! has and the log lacks, in order, with a checkpoint every
//! [`CHECKPOINT_INTERVAL`] versions.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use anyhow::{Context as _, bail};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Value, json};

use crate::catalog::{Catalog, DataFile, TableRecord, TableVersion};
use crate::files::Created;
use crate::stage::{self, Kind};
use crate::store::Store;
use crate::tables::types::{TableTypes, delta_schema, has_timestamp_ntz};

/// Versions between checkpoints: opening a table reads the last checkpoint and
/// at most this many commits after it.
pub const CHECKPOINT_INTERVAL: i64 = 100;

const ENGINE: &str = concat!("weir/", env!("CARGO_PKG_VERSION"));

/// A table's directory: its key in the store (relative to the data directory, by default).
pub fn table_dir(collection: &str, table: &str) -> String {
    format!("tables/{collection}/{table}")
}

fn log_dir(table_dir: &str) -> String {
    format!("{table_dir}/_delta_log")
}

fn commit_file(table_dir: &str, version: i64) -> String {
    format!("{}/{version:020}.json", log_dir(table_dir))
}

fn checkpoint_file(table_dir: &str, version: i64) -> String {
    format!("{}/{version:020}.checkpoint.parquet", log_dir(table_dir))
}

/// The protocol a schema needs: the oldest readers can read it unless it
/// has a timestamp without a time zone, a table feature.
fn protocol(schema: &Value) -> Value {
    if has_timestamp_ntz(schema) {
        json!({ "minReaderVersion": 3, "minWriterVersion": 7,
                "readerFeatures": ["timestampNtz"], "writerFeatures": ["timestampNtz"] })
    } else {
        json!({ "minReaderVersion": 1, "minWriterVersion": 2 })
    }
}

/// One table whose log is being written: the catalog it comes from, its
/// identity, and where it lives.
struct TableLog<'a> {
    catalog: &'a Catalog,
    collection: &'a str,
    table: &'a str,
    record: TableRecord,
    /// `collection/table`, as its owner names it.
    name: String,
    /// Its key in the store (data files are named so in the catalog).
    dir: String,
}

impl TableLog<'_> {
    fn metadata(&self, schema: &Value) -> Value {
        json!({
            "id": self.record.delta_id,
            "name": self.name,
            "format": { "provider": "parquet", "options": {} },
            "schemaString": schema.to_string(),
            "partitionColumns": [],
            "configuration": {},
            "createdTime": self.record.created_at_ms,
        })
    }

    /// Version 1's columns: recorded, or (a table committed before weir
    /// recorded them) those of its first file.
    fn first_schema(&self, first: &TableVersion) -> anyhow::Result<Value> {
        if let Some(schema) = &first.schema {
            return Ok(schema.clone());
        }
        let file = first.files.first().context("version 1 has no file")?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(self.catalog.store().blob(&file.path)?)?;
        Ok(delta_schema(TableTypes::new(reader.schema())?.written()))
    }

    /// Delta version 0: the table, with version 1's columns and no rows.
    fn creation(&self, first: &TableVersion) -> anyhow::Result<Vec<Value>> {
        let schema = &self.first_schema(first)?;
        Ok(vec![
            json!({ "commitInfo": { "timestamp": self.record.created_at_ms, "operation": "CREATE TABLE",
                                    "operationParameters": {}, "isBlindAppend": true, "engineInfo": ENGINE } }),
            json!({ "protocol": protocol(schema) }),
            json!({ "metaData": self.metadata(schema) }),
        ])
    }

    /// Delta version `v.version`: its files, its partitions' offsets and its
    /// execution; or, for a compaction, the files it replaces and their replacement.
    fn version_actions(&self, v: &TableVersion) -> anyhow::Result<Vec<Value>> {
        let dir = &self.dir;
        let compaction = v.execution.is_none();
        let info = match v.execution {
            Some(execution) => json!({
                "timestamp": v.created_at_ms,
                "operation": "STREAMING UPDATE",
                "operationParameters": { "outputMode": "Append", "epochId": execution },
                "isBlindAppend": true,
                "engineInfo": ENGINE,
                "weirExecution": execution,
            }),
            None => json!({
                "timestamp": v.created_at_ms,
                "operation": "OPTIMIZE",
                "operationParameters": { "compacted": v.removed.len() },
                "isBlindAppend": false,
                "engineInfo": ENGINE,
            }),
        };
        let mut actions = vec![json!({ "commitInfo": info })];
        // The first version's columns are version 0's; a later change comes with its own.
        if let Some(schema) = v.schema.as_ref().filter(|_| v.version > 1) {
            actions.push(json!({ "protocol": protocol(schema) }));
            actions.push(json!({ "metaData": self.metadata(schema) }));
        }
        for txn in &v.txns {
            actions.push(
                json!({ "txn": { "appId": txn.app_id, "version": txn.version, "lastUpdated": v.created_at_ms } }),
            );
        }
        for file in &v.removed {
            actions.push(json!({ "remove": {
                "path": relative(dir, file)?,
                "deletionTimestamp": v.created_at_ms,
                "dataChange": false,
                "extendedFileMetadata": true,
                "partitionValues": {},
                "size": file.size,
            } }));
        }
        for file in &v.files {
            actions.push(json!({ "add": add(dir, file, v.created_at_ms, !compaction)? }));
        }
        Ok(actions)
    }
}

fn relative(dir: &str, file: &DataFile) -> anyhow::Result<String> {
    let relative = file.path.strip_prefix(dir).and_then(|p| p.strip_prefix('/'));
    let relative =
        relative.with_context(|| format!("data file {} is not inside its table's directory {dir}", file.path))?;
    Ok(relative.to_string())
}

fn add(dir: &str, file: &DataFile, at_ms: i64, data_change: bool) -> anyhow::Result<Value> {
    let stats = file.stats.clone().unwrap_or_else(|| json!({ "numRecords": file.rows }).to_string());
    Ok(json!({
        "path": relative(dir, file)?,
        "partitionValues": {},
        "size": file.size,
        "modificationTime": at_ms,
        "dataChange": data_change,
        "stats": stats,
    }))
}

fn lines(actions: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for action in actions {
        serde_json::to_writer(&mut out, action).expect("json");
        out.push(b'\n');
    }
    out
}

/// The newest Delta version of each table directory this process has written
/// or found (so that a commit writes only what is new), each behind its own
/// lock: one writer per table in this process, tables side by side.
static KNOWN: LazyLock<Mutex<HashMap<String, Known>>> = LazyLock::new(Default::default);

/// A table's newest written version, behind the lock its writers take.
type Known = Arc<Mutex<Option<i64>>>;

/// What [`sync`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// The log's newest version (`None`: the table has no version yet).
    pub version: Option<i64>,
    /// Commits this call wrote (not counting those it found already written).
    pub written: usize,
    pub checkpoints: usize,
}

/// Writes the Delta commits the catalog has and the table's log lacks, in
/// order, and the checkpoints due. Safe to call at any time, from anywhere:
/// a commit is only ever created, never overwritten.
pub fn sync(catalog: &Catalog, collection: &str, table: &str) -> anyhow::Result<Synced> {
    let Some(record) = catalog.table_record(collection, table)? else { return Ok(Synced::default()) };
    let store = catalog.store();
    let dir = table_dir(collection, table);
    let name = format!("{}/{table}", collection.split_once('/').map_or(collection, |(_, c)| c));
    let log = TableLog { catalog, collection, table, record, name: name.clone(), dir: dir.clone() };
    // One writer per table in this process; others (another process, a node) are
    // kept out of harm's way by put-if-absent.
    let table_lock = KNOWN.lock().unwrap_or_else(|e| e.into_inner()).entry(store.location(&dir)).or_default().clone();
    let mut known = table_lock.lock().unwrap_or_else(|e| e.into_inner());
    // What this process wrote last, while it is still there (one look-up); else
    // the log's newest. Commits another node wrote since are found written, the same.
    let mut newest = match *known {
        Some(v) if store.exists(&commit_file(&dir, v))? => v,
        _ => newest_commit(store, &dir)?.unwrap_or(-1),
    };
    let versions = catalog.versions_after(collection, table, newest.max(0))?;
    let mut synced = Synced { version: (newest >= 0).then_some(newest), ..Synced::default() };
    if newest < 0 {
        let Some(first) = versions.first() else { return Ok(synced) };
        if first.version != 1 {
            bail!("table `{name}`: the catalog's first version is {}, not 1", first.version);
        }
        synced.written += write_commit(store, &dir, 0, &log.creation(first)?)? as usize;
        newest = 0;
    }
    let after = newest;
    for v in versions.iter().filter(|v| v.version > after) {
        if v.version != newest + 1 {
            bail!("table `{name}`: the catalog skips from version {newest} to {}", v.version);
        }
        let v = with_sizes(store, v)?;
        synced.written += write_commit(store, &dir, v.version, &log.version_actions(&v)?)? as usize;
        newest = v.version;
        *known = Some(newest);
    }
    *known = Some(newest);
    synced.version = Some(newest);
    // The newest checkpoint due (also after a crash that came between a commit and its checkpoint).
    let due = newest / CHECKPOINT_INTERVAL * CHECKPOINT_INTERVAL;
    if due > 0 && !store.exists(&checkpoint_file(&dir, due))? {
        log.checkpoint(due)?;
        synced.checkpoints += 1;
    }
    Ok(synced)
}

/// Brings every table's log up to the catalog (on start, before any worker
/// runs). A table that cannot be brought up is reported, and the others are not held up.
pub fn sync_all(catalog: &Catalog) -> anyhow::Result<()> {
    for (collection, table) in catalog.all_tables()? {
        match sync(catalog, &collection, &table) {
            Ok(synced) if synced.written > 0 => {
                tracing::info!(collection, table, commits = synced.written, version = ?synced.version, "wrote the Delta commits the log lacked");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(collection, table, error = %format!("{e:#}"), "bringing the Delta log up to the catalog")
            }
        }
    }
    Ok(())
}

/// The files live after `versions` (oldest first), each with the version that added it.
pub(crate) fn live_files(versions: &[TableVersion]) -> Vec<(&TableVersion, DataFile)> {
    let mut live: Vec<(&TableVersion, DataFile)> = Vec::new();
    for v in versions {
        live.retain(|(_, f)| !v.removed.iter().any(|r| r.path == f.path));
        live.extend(v.files.iter().map(|f| (v, f.clone())));
    }
    live
}

/// A file recorded without its size (before weir kept them), with it.
pub(crate) fn with_size(store: &Store, mut file: DataFile) -> anyhow::Result<DataFile> {
    if file.size == 0 {
        file.size = store.size(&file.path)?.with_context(|| format!("data file {} is missing", file.path))?;
    }
    Ok(file)
}

/// A version, its files with their sizes.
fn with_sizes(store: &Store, v: &TableVersion) -> anyhow::Result<TableVersion> {
    let mut v = v.clone();
    v.files = v.files.into_iter().map(|f| with_size(store, f)).collect::<anyhow::Result<_>>()?;
    Ok(v)
}

/// Writes one commit, put-if-absent. `true`: written; `false`: it was there
/// already, byte for byte (anything else there is an error: weir did not write
/// it). Its bytes are synced, its name not: a commit lost with its directory's
/// last writes is written again, the same, by the next [`sync`].
fn write_commit(store: &Store, dir: &str, version: i64, actions: &[Value]) -> anyhow::Result<bool> {
    let key = commit_file(dir, version);
    let bytes = lines(actions);
    match store.create(&key, bytes.clone().into())? {
        Created::Written => Ok(true),
        Created::AlreadyThere => {
            if store.get(&key)?.as_deref() != Some(&bytes[..]) {
                bail!(
                    "{} holds a commit weir did not write (another writer, or an edited log): move it aside, and weir writes version {version} as its catalog has it",
                    store.location(&key)
                );
            }
            Ok(false)
        }
    }
}

/// The newest commit in a table's log (`None`: no log yet).
fn newest_commit(store: &Store, dir: &str) -> anyhow::Result<Option<i64>> {
    Ok(log_files(store, dir)?.commits.last().copied())
}

struct LogFiles {
    commits: Vec<i64>,
    checkpoints: Vec<i64>,
}

fn log_files(store: &Store, dir: &str) -> anyhow::Result<LogFiles> {
    let mut files = LogFiles { commits: Vec::new(), checkpoints: Vec::new() };
    for entry in store.list(&log_dir(dir))? {
        let name = entry.name;
        if let Some(v) = name.strip_suffix(".json").and_then(|n| n.parse().ok()) {
            files.commits.push(v);
        } else if let Some(v) = name.strip_suffix(".checkpoint.parquet").and_then(|n| n.parse().ok()) {
            files.checkpoints.push(v);
        }
    }
    files.commits.sort_unstable();
    files.checkpoints.sort_unstable();
    Ok(files)
}

/// The checkpoint's columns: one struct per action kind, one row per action.
fn checkpoint_schema() -> SchemaRef {
    let utf8 = |name: &str| Field::new(name, DataType::Utf8, true);
    let long = |name: &str| Field::new(name, DataType::Int64, true);
    let strings = |name: &str| Field::new_list(name, Field::new_list_field(DataType::Utf8, true), true);
    let map = |name: &str| {
        Field::new_map(name, "key_value", Field::new("key", DataType::Utf8, false), utf8("value"), false, true)
    };
    let structure = |name: &str, fields: Vec<Field>| Field::new_struct(name, fields, true);
    Arc::new(Schema::new(vec![
        structure("txn", vec![utf8("appId"), long("version"), long("lastUpdated")]),
        structure(
            "add",
            vec![
                utf8("path"),
                map("partitionValues"),
                long("size"),
                long("modificationTime"),
                Field::new("dataChange", DataType::Boolean, true),
                utf8("stats"),
            ],
        ),
        structure(
            "remove",
            vec![
                utf8("path"),
                long("deletionTimestamp"),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("extendedFileMetadata", DataType::Boolean, true),
                map("partitionValues"),
                long("size"),
            ],
        ),
        structure(
            "metaData",
            vec![
                utf8("id"),
                utf8("name"),
                utf8("description"),
                structure("format", vec![utf8("provider"), map("options")]),
                utf8("schemaString"),
                strings("partitionColumns"),
                map("configuration"),
                long("createdTime"),
            ],
        ),
        structure(
            "protocol",
            vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                strings("readerFeatures"),
                strings("writerFeatures"),
            ],
        ),
    ]))
}

impl TableLog<'_> {
    /// The table's state as of `version`, as actions: protocol, metadata, the
    /// newest `txn` of each application, every file.
    fn state(&self, version: i64) -> anyhow::Result<Vec<Value>> {
        let versions: Vec<TableVersion> = self
            .catalog
            .versions(self.collection, self.table)?
            .into_iter()
            .take_while(|v| v.version <= version)
            .collect();
        let schema = match versions.iter().rev().find_map(|v| v.schema.clone()) {
            Some(schema) => schema,
            None => self.first_schema(versions.first().context("no version to checkpoint")?)?,
        };
        let mut txns = BTreeMap::new();
        let mut actions = vec![json!({ "protocol": protocol(&schema) }), json!({ "metaData": self.metadata(&schema) })];
        for v in &versions {
            for txn in &v.txns {
                txns.insert(
                    txn.app_id.clone(),
                    json!({ "appId": txn.app_id, "version": txn.version, "lastUpdated": v.created_at_ms }),
                );
            }
        }
        for (added_by, file) in live_files(&versions) {
            let file = with_size(self.catalog.store(), file)?;
            actions.push(json!({ "add": add(&self.dir, &file, added_by.created_at_ms, false)? }));
        }
        actions.extend(txns.into_values().map(|txn| json!({ "txn": txn })));
        Ok(actions)
    }

    /// Writes the checkpoint of `version` and points `_last_checkpoint` at it.
    fn checkpoint(&self, version: i64) -> anyhow::Result<()> {
        let actions = self.state(version)?;
        let schema = checkpoint_schema();
        let mut decoder = arrow::json::ReaderBuilder::new(schema.clone()).build_decoder()?;
        decoder.serialize(&actions)?;
        let batch = decoder.flush()?.context("a checkpoint has actions")?;
        let store = self.catalog.store();
        store
            .put(&checkpoint_file(&self.dir, version), stage::parquet_bytes(&schema, &[batch], Kind::Table)?.into())?;
        let hint = json!({ "version": version, "size": actions.len() });
        store.put(&format!("{}/_last_checkpoint", log_dir(&self.dir)), hint.to_string().into())
    }
}

/// A table's files as of one version, read from its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    pub version: i64,
    /// Relative to the table's directory, oldest first, with their rows.
    pub files: Vec<(String, u64)>,
}

/// Why a version cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the table has no Delta log yet")]
    NoLog,
    #[error("the log has no version {version}: its latest is {latest}")]
    NoVersion { version: i64, latest: i64 },
    #[error(transparent)]
    Read(#[from] anyhow::Error),
}

/// The newest version of the log of the table at `dir`.
pub fn latest(store: &Store, dir: &str) -> anyhow::Result<Option<i64>> {
    newest_commit(store, dir)
}

/// The table at `dir` as of `version` (default: its latest): the newest
/// checkpoint at or before it, then each commit after, adds and removes in order.
pub fn replay(store: &Store, dir: &str, version: Option<i64>) -> Result<LogState, ReplayError> {
    let files = log_files(store, dir)?;
    let latest = *files.commits.last().ok_or(ReplayError::NoLog)?;
    let version = version.unwrap_or(latest);
    if files.commits.binary_search(&version).is_err() {
        return Err(ReplayError::NoVersion { version, latest });
    }
    let mut state: Vec<(String, u64)> = Vec::new();
    let from = match files.checkpoints.iter().rev().find(|c| **c <= version) {
        Some(&cp) => {
            state = checkpointed_files(store, &checkpoint_file(dir, cp))?;
            cp + 1
        }
        None => 0,
    };
    for v in from..=version {
        let key = commit_file(dir, v);
        let text = store.get(&key)?.with_context(|| format!("{} is missing", store.location(&key)))?;
        for line in text.split(|b| *b == b'\n').filter(|l| !l.trim_ascii().is_empty()) {
            let action: Value = serde_json::from_slice(line).with_context(|| format!("{key}: not JSON"))?;
            if let Some(add) = action.get("add") {
                let path = add["path"].as_str().unwrap_or_default().to_string();
                state.retain(|(p, _)| *p != path);
                state.push((path, rows_of(add["stats"].as_str())));
            } else if let Some(path) = action.get("remove").and_then(|r| r["path"].as_str()) {
                state.retain(|(p, _)| p != path);
            }
        }
    }
    Ok(LogState { version, files: state })
}

fn rows_of(stats: Option<&str>) -> u64 {
    stats.and_then(|s| serde_json::from_str::<Value>(s).ok()).and_then(|s| s["numRecords"].as_u64()).unwrap_or(0)
}

fn checkpointed_files(store: &Store, path: &str) -> anyhow::Result<Vec<(String, u64)>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(store.blob(path)?)?.build()?;
    let mut files = Vec::new();
    for batch in reader {
        let batch: RecordBatch = batch?;
        let add = batch.column_by_name("add").context("a checkpoint has an `add` column")?.as_struct();
        let (paths, stats) = (add.column_by_name("path"), add.column_by_name("stats"));
        let (Some(paths), Some(stats)) = (paths, stats) else { bail!("{path}: `add` lacks path or stats") };
        let (paths, stats) = (paths.as_string::<i32>(), stats.as_string::<i32>());
        for row in (0..add.len()).filter(|i| add.is_valid(*i)) {
            files.push((paths.value(row).to_string(), rows_of(stats.is_valid(row).then(|| stats.value(row)))));
        }
    }
    Ok(files)
}
