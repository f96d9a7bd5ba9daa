//! Each table's Delta transaction log, which weir shares with other engines.
//!
//! The catalog is the commit point: a table version and its source offsets
//! commit there first, and [`sync`] then writes each version the log lacks as
//! a Delta commit. Other engines write the same log (a compaction, a delete,
//! an added column), so weir follows the protocol's optimistic concurrency: it
//! reads what was committed since it last looked ([`follow`] says whether it
//! can write under it), then creates the next free version, put-if-absent;
//! taken, it reads the commit that took it and tries the one after. A weir
//! commit is a blind append: its files, one `txn` per partition it read (the
//! partition's next offset), and a `commitInfo` naming its execution and its
//! weir version. That name is how a version is found in the log again, after
//! a crash between the two commits or from another node, so a version is
//! never written twice nor left out; the catalog keeps which Delta version
//! holds each (weir's version N is Delta version N only until another writer
//! commits). Version 0 creates the table from version 1's columns.
//!
//! `log` reads a log, whoever wrote it; `follow` holds what weir can write
//! under; `checkpoint` writes one every [`CHECKPOINT_INTERVAL`] versions.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use anyhow::{Context as _, bail};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Value, json};

use crate::catalog::{Catalog, DataFile, TableRecord, TableVersion, now_ms};
use crate::files::Created;
use crate::store::Store;
use crate::tables::partition;
use crate::tables::types::{TableTypes, delta_schema, has_timestamp_ntz};

mod checkpoint;
pub mod follow;
pub mod log;

pub use follow::Blocked;
use log::{Commit, Head, commit_file};
pub use log::{LiveFile, LogState, ReplayError, replay};

/// Versions between checkpoints: opening a table reads the last checkpoint and
/// at most this many commits after it.
pub const CHECKPOINT_INTERVAL: i64 = 100;

/// Versions a table may have committed in the catalog and not in its log
/// (which no reader sees) before its publisher takes no new batch.
pub const UNLOGGED_BOUND: usize = 3;

const ENGINE: &str = concat!("weir/", env!("CARGO_PKG_VERSION"));

/// The metadata's configuration key holding a partitioned table's
/// `partition_by` (a JSON list): Delta names only the partition columns.
pub const PARTITION_BY_KEY: &str = "weir.partitionBy";

pub use crate::tables::file::table_dir;

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

/// The committed versions a table's log does not hold: why, and since when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLag {
    /// How many versions no reader of the log sees.
    pub unlogged: usize,
    /// The oldest of them: the table reads as it was before it.
    pub since_version: i64,
    /// Why the last attempt to write them failed (as this node saw it).
    pub error: Option<String>,
    pub failing_since_ms: Option<i64>,
}

/// The table's versions are committed but its log is behind by
/// [`UNLOGGED_BOUND`] or more: its publisher waits, taking no new batch,
/// until they are written (a store outage, a full disk, permissions).
#[derive(Debug, thiserror::Error)]
#[error(
    "table `{table}`: versions {since_version} and after ({unlogged}) are committed but not in its Delta log, so no reader sees them ({cause}); weir takes no new batch until they are written"
)]
pub struct LogBehind {
    pub table: String,
    pub unlogged: usize,
    pub since_version: i64,
    pub cause: String,
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

/// What this process knows of each table's log (its head, as far as it has
/// read), each behind its own lock: one writer per table in this process,
/// tables side by side. Other processes and other engines are kept out of
/// harm's way by put-if-absent.
static FOLLOWED: LazyLock<Mutex<HashMap<String, Arc<Mutex<Option<Head>>>>>> = LazyLock::new(Default::default);

/// Why each table's log last failed to take its versions, and since when.
static STUCK: LazyLock<Mutex<HashMap<String, (String, i64)>>> = LazyLock::new(Default::default);

/// Runs `f` on the table's log under its lock; `None`: no such table.
fn with_log<R>(
    catalog: &Catalog,
    collection: &str,
    table: &str,
    f: impl FnOnce(&TableLog, &mut Option<Head>) -> R,
) -> anyhow::Result<Option<R>> {
    let Some(record) = catalog.table_record(collection, table)? else { return Ok(None) };
    let dir = table_dir(collection, table);
    let name = format!("{}/{table}", collection.split_once('/').map_or(collection, |(_, c)| c));
    let log = TableLog { catalog, collection, table, record, name, dir };
    let location = catalog.store().location(&log.dir);
    let cell = FOLLOWED.lock().unwrap_or_else(|e| e.into_inner()).entry(location).or_default().clone();
    let mut head = cell.lock().unwrap_or_else(|e| e.into_inner());
    Ok(Some(f(&log, &mut head)))
}

/// What [`sync`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// The log's newest version (`None`: the table has no version yet).
    pub version: Option<i64>,
    /// Commits this call wrote (not counting versions it found already written).
    pub written: usize,
    pub checkpoints: usize,
}

/// Writes the versions the catalog has and the table's log lacks, in order,
/// each at the next free Delta version, and the checkpoint due. Safe to call
/// at any time, from anywhere: a commit is only ever created, never
/// overwritten, and a version already in the log is found there.
pub fn sync(catalog: &Catalog, collection: &str, table: &str) -> anyhow::Result<Synced> {
    with_log(catalog, collection, table, |log, head| log.sync_noted(head))?.unwrap_or(Ok(Synced::default()))
}

/// Before a batch with `columns` (a Delta schema) commits a version of the
/// table: brings the log up to the catalog, and says whether the version can
/// go into it. A change weir cannot write under is [`Blocked`] (nothing is
/// committed: the publisher stops); a log [`UNLOGGED_BOUND`] versions behind
/// is [`LogBehind`] (the batch waits).
pub fn ready(catalog: &Catalog, collection: &str, table: &str, columns: &Value) -> anyhow::Result<()> {
    // The batch's columns the table has are the catalog's to check, in its
    // commit; those it does not have against those another writer may have added.
    let known = catalog.table_schema(collection, table, i64::MAX)?;
    let has = |name: &Value| {
        known.as_ref().and_then(|k| k["fields"].as_array()).is_some_and(|f| f.iter().any(|f| f["name"] == *name))
    };
    let mut new = columns.clone();
    if let Some(fields) = new["fields"].as_array_mut() {
        fields.retain(|f| !has(&f["name"]));
    }
    let checked = with_log(catalog, collection, table, |log, head| -> anyhow::Result<Option<anyhow::Error>> {
        let synced = log.sync_noted(head);
        if let Err(e) = synced {
            if e.downcast_ref::<Blocked>().is_some() {
                return Err(e);
            }
            return Ok(Some(e));
        }
        if let Some(head) = head {
            follow::writable(&log.name, head, known.as_ref(), &log.partition_columns())?;
            follow::merge_schema(&log.name, head, &new)?;
        }
        Ok(None)
    })?;
    let Some(cause) = checked.transpose()?.flatten() else { return Ok(()) };
    let unlogged = catalog.unlogged_versions(collection, table)?;
    match unlogged.first() {
        Some(first) if unlogged.len() >= UNLOGGED_BOUND => Err(LogBehind {
            table: table.to_string(),
            unlogged: unlogged.len(),
            since_version: first.version,
            cause: format!("{cause:#}"),
        }
        .into()),
        _ => Ok(()),
    }
}

/// The versions the table's log lacks, if any, and why.
pub fn lag(catalog: &Catalog, collection: &str, table: &str) -> anyhow::Result<Option<LogLag>> {
    let unlogged = catalog.unlogged_versions(collection, table)?;
    let Some(first) = unlogged.first() else { return Ok(None) };
    let key = catalog.store().location(&table_dir(collection, table));
    let stuck = STUCK.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
    Ok(Some(LogLag {
        unlogged: unlogged.len(),
        since_version: first.version,
        error: stuck.as_ref().map(|(e, _)| e.clone()),
        failing_since_ms: stuck.map(|(_, since)| since),
    }))
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

/// The newest version of the log of the table at `dir`.
pub fn latest(store: &Store, dir: &str) -> anyhow::Result<Option<i64>> {
    Ok(log::log_files(store, dir)?.commits.last().copied())
}

impl TableLog<'_> {
    /// [`Self::sync`], noting why it failed (for `publisher status`) or that it did not.
    fn sync_noted(&self, head: &mut Option<Head>) -> anyhow::Result<Synced> {
        let synced = self.sync(head);
        let key = self.catalog.store().location(&self.dir);
        let mut stuck = STUCK.lock().unwrap_or_else(|e| e.into_inner());
        match &synced {
            Ok(_) => stuck.remove(&key),
            Err(e) => {
                let since = stuck.get(&key).map_or_else(now_ms, |(_, since)| *since);
                stuck.insert(key, (format!("{e:#}"), since))
            }
        };
        synced
    }

    fn sync(&self, cached: &mut Option<Head>) -> anyhow::Result<Synced> {
        let store = self.catalog.store();
        // What this process read last, while its newest commit is still there (one
        // look-up); a log that lost commits behind its back is read anew.
        if let Some(head) = cached
            && head.version >= 0
            && !store.exists(&commit_file(&self.dir, head.version))?
        {
            *cached = None;
        }
        let head = match cached {
            Some(head) => head,
            None => cached.insert(self.open()?),
        };
        // Versions found in the log as it is read (written by another node, or before a crash).
        let mut found = HashSet::new();
        self.catch_up(head, &mut found)?;
        let mut synced = Synced::default();
        let pending = self.catalog.unlogged_versions(self.collection, self.table)?;
        if let Some(first) = pending.first() {
            // The columns the log holds already, as weir wrote them: another writer must have kept them.
            let mut columns = self.catalog.table_schema(self.collection, self.table, first.version)?;
            for v in &pending {
                if !found.contains(&v.version) {
                    synced.written += self.write_version(head, v, columns.as_ref(), &mut found)? as usize;
                }
                columns = v.schema.clone().or(columns);
            }
        }
        synced.version = (head.version >= 0).then_some(head.version);
        // The newest checkpoint due (also after a crash that came between a commit and its checkpoint).
        let due = head.version / CHECKPOINT_INTERVAL * CHECKPOINT_INTERVAL;
        if due > 0 && !store.exists(&log::checkpoint_file(&self.dir, due))? {
            let state = replay(store, &self.dir, Some(due))?;
            checkpoint::write(store, &self.dir, &state)?;
            synced.checkpoints += 1;
        }
        Ok(synced)
    }

    /// The log's head as it stands. Versions the catalog places past its end
    /// were lost with a crash before their commits were durable (or predate
    /// the catalog keeping where they are): they are written again.
    fn open(&self) -> anyhow::Result<Head> {
        let head = match replay(self.catalog.store(), &self.dir, None) {
            Ok(state) => state.head,
            Err(ReplayError::NoLog) => Head::default(),
            Err(e) => return Err(e.into()),
        };
        let lost = self.catalog.unlog_after(self.collection, self.table, head.version)?;
        if lost > 0 {
            tracing::warn!(table = %self.name, versions = lost, log_version = head.version, "the Delta log ends before versions the catalog placed in it: writing them again");
        }
        Ok(head)
    }

    /// Reads the commits after the head, moving it past each.
    fn catch_up(&self, head: &mut Head, found: &mut HashSet<i64>) -> anyhow::Result<()> {
        while let Some(commit) = log::read_commit(self.catalog.store(), &self.dir, head.version + 1)? {
            self.follow(head, &commit, found)?;
        }
        Ok(())
    }

    /// Moves the head past the next commit, noting where a weir version is.
    fn follow(&self, head: &mut Head, commit: &Commit, found: &mut HashSet<i64>) -> anyhow::Result<()> {
        if let Some(v) = commit.weir_version() {
            self.catalog.set_delta_version(self.collection, self.table, v, commit.version)?;
            found.insert(v);
        }
        head.follow(commit);
        Ok(())
    }

    /// Writes version `v` at the next free Delta version; `false` when the
    /// log turned out to hold it already.
    fn write_version(
        &self,
        head: &mut Head,
        v: &TableVersion,
        columns: Option<&Value>,
        found: &mut HashSet<i64>,
    ) -> anyhow::Result<bool> {
        loop {
            if let Some(&at) = head.placed.get(&v.version) {
                // In the log already: a crash came after its commit and before the catalog noted it.
                self.catalog.set_delta_version(self.collection, self.table, v.version, at)?;
                found.insert(v.version);
                return Ok(false);
            }
            if head.version < 0 {
                if v.version != 1 {
                    bail!(
                        "table `{}`: the catalog's first version to log is {}, and the log is empty",
                        self.name,
                        v.version
                    );
                }
                let creation = self.creation(v)?;
                match self.create(0, &creation)? {
                    Some(taken) => self.follow(head, &taken, found)?,
                    None => head.follow(&Commit { version: 0, actions: creation }),
                }
                continue;
            }
            follow::writable(&self.name, head, columns, &self.partition_columns())?;
            let actions = self.version_actions(v, head)?;
            let at = head.version + 1;
            match self.create(at, &actions)? {
                None => {
                    crate::crash::point("after-delta-commit");
                    // Noted before the head moves past it: if noting fails, the next sync
                    // reads the commit again and finds the version there.
                    self.catalog.set_delta_version(self.collection, self.table, v.version, at)?;
                    head.follow(&Commit { version: at, actions });
                    return Ok(true);
                }
                Some(taken) => {
                    self.follow(head, &taken, found)?;
                    if found.contains(&v.version) {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// Creates the commit at `version`; `Some`: another writer's was there.
    fn create(&self, version: i64, actions: &[Value]) -> anyhow::Result<Option<Commit>> {
        let store = self.catalog.store();
        let key = commit_file(&self.dir, version);
        match store.create(&key, lines(actions).into())? {
            Created::Written => Ok(None),
            Created::AlreadyThere => {
                let bytes = store.get(&key)?.with_context(|| format!("{} vanished", store.location(&key)))?;
                Ok(Some(Commit::parse(&store.location(&key), version, &bytes)?))
            }
        }
    }

    /// The table's partition columns, outermost first (none: not partitioned).
    fn partition_columns(&self) -> Vec<String> {
        partition::columns_of(&self.record.partition_by)
    }

    fn metadata(&self, schema: &Value) -> Value {
        // The entries' words, for readers that want the transforms behind the derived columns.
        let configuration = match self.record.partition_by.is_empty() {
            true => json!({}),
            false => json!({ PARTITION_BY_KEY: serde_json::to_string(&self.record.partition_by).expect("json") }),
        };
        json!({
            "id": self.record.delta_id,
            "name": self.name,
            "format": { "provider": "parquet", "options": {} },
            "schemaString": schema.to_string(),
            "partitionColumns": self.partition_columns(),
            "configuration": configuration,
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

    /// The commit of version `v` on top of `head`: its files, its partitions'
    /// offsets and its execution, with the columns it adds merged into the
    /// table's; or, for a compaction, the files it replaces and their
    /// replacement (nothing, if another writer removed one of them first);
    /// or, for a reprocess, the files it removes (those another writer
    /// removed first are gone already) and the offsets it moves back to.
    fn version_actions(&self, v: &TableVersion, head: &Head) -> anyhow::Result<Vec<Value>> {
        let dir = &self.dir;
        let compaction = v.execution.is_none();
        let reprocess = v.execution.is_some() && !v.removed.is_empty();
        let mut info = match v.execution {
            Some(execution) if reprocess => json!({
                "timestamp": v.created_at_ms,
                "operation": "DELETE",
                "operationParameters": { "predicate": format!("rows weir reprocesses (execution {execution})") },
                "isBlindAppend": false,
                "engineInfo": ENGINE,
                "weirExecution": execution,
            }),
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
        info["weirVersion"] = json!(v.version);
        if compaction && let Some(gone) = self.removed_elsewhere(v, head)? {
            // Another writer took one of its files first (its own compaction, a
            // delete): this compaction is given up, an empty commit in its place.
            info["operationParameters"] = json!({ "abandoned": format!("{gone} was removed by another writer first") });
            return Ok(vec![json!({ "commitInfo": info })]);
        }
        let mut actions = vec![json!({ "commitInfo": info })];
        if let Some(schema) = &v.schema
            && let Some(merged) = follow::merge_schema(&self.name, head, schema)?
        {
            if let Some(protocol) = follow::merge_protocol(head.protocol.as_ref(), &protocol(&merged)) {
                actions.push(json!({ "protocol": protocol }));
            }
            let mut metadata = head.metadata.clone().unwrap_or_else(|| self.metadata(&merged));
            metadata["schemaString"] = json!(merged.to_string());
            actions.push(json!({ "metaData": metadata }));
        }
        for txn in &v.txns {
            actions.push(
                json!({ "txn": { "appId": txn.app_id, "version": txn.version, "lastUpdated": v.created_at_ms } }),
            );
        }
        let live = match reprocess {
            true => Some(self.live_files(head)?),
            false => None,
        };
        for file in &v.removed {
            let path = relative(dir, file)?;
            if live.as_ref().is_some_and(|live| !live.contains(&path)) {
                continue;
            }
            actions.push(json!({ "remove": {
                "path": log::encode_path(&path),
                "deletionTimestamp": v.created_at_ms,
                "dataChange": reprocess,
                "extendedFileMetadata": true,
                "partitionValues": partition_values(file),
                "size": file.size,
            } }));
        }
        for file in &v.files {
            let file = with_size(self.catalog.store(), file.clone())?;
            actions.push(json!({ "add": add(dir, &file, v.created_at_ms, !compaction)? }));
        }
        Ok(actions)
    }

    /// A file compaction `v` removes that the log no longer has live at `head`.
    fn removed_elsewhere(&self, v: &TableVersion, head: &Head) -> anyhow::Result<Option<String>> {
        let live = self.live_files(head)?;
        for file in &v.removed {
            let path = relative(&self.dir, file)?;
            if !live.contains(&path) {
                return Ok(Some(path));
            }
        }
        Ok(None)
    }

    /// The files live at `head`, relative to the table's directory.
    fn live_files(&self, head: &Head) -> anyhow::Result<HashSet<String>> {
        let state = replay(self.catalog.store(), &self.dir, Some(head.version))?;
        Ok(state.files.iter().map(|f| f.path.clone()).collect())
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
        "path": log::encode_path(&relative(dir, file)?),
        "partitionValues": partition_values(file),
        "size": file.size,
        "modificationTime": at_ms,
        "dataChange": data_change,
        "stats": stats,
    }))
}

/// A file's `partitionValues`: each partition column's value as text, or null.
fn partition_values(file: &DataFile) -> Value {
    Value::Object(file.partition_values.iter().map(|(column, value)| (column.clone(), json!(value))).collect())
}

fn lines(actions: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for action in actions {
        serde_json::to_writer(&mut out, action).expect("json");
        out.push(b'\n');
    }
    out
}

/// A file recorded without its size (before weir kept them), with it.
pub(crate) fn with_size(store: &Store, mut file: DataFile) -> anyhow::Result<DataFile> {
    if file.size == 0 {
        file.size = store.size(&file.path)?.with_context(|| format!("data file {} is missing", file.path))?;
    }
    Ok(file)
}
