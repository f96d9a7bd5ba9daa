//! Retention: `weir table vacuum TABLE --keep-versions N`. The last N versions
//! stay readable, time travel included; older ones may not. A stream table only
//! ever appends, so every file is needed by the latest version until it is
//! compacted: each vacuum (1) deletes the files that only versions before the
//! kept ones need (those a compaction removed at or before the oldest kept
//! version, and files no version ever committed: a crashed attempt's), and
//! (2) compacts the small files added before the oldest kept version into
//! large ones, as a new version that removes them through the log (`remove`,
//! with no change to the data), so that a later vacuum, once that version is
//! old enough, can delete them. No row is ever dropped, and no kept version
//! ever loses a file it reads. The window counts weir's versions; every Delta
//! version from the oldest kept one on stays readable, other engines' too, and
//! weir compacts only its own files (others' are theirs to compact).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

use crate::catalog::{Catalog, DataFile};
use crate::store::Store;
use crate::tables::file::{Kind, ParquetFile, table_file};
use arrow::datatypes::{Schema, SchemaRef};

use crate::tables::{self, Snapshot, SnapshotFile, delta, export_schema, partition, read_batches};

/// A file this size or larger is left as it is.
const SMALL_FILE_BYTES: u64 = 64 << 20;
/// How much input one compacted file takes, at most.
const COMPACTED_FILE_BYTES: u64 = 256 << 20;
/// A file no version names is deleted only once it is this old: younger, it
/// may be a batch's, written and about to be committed.
const ORPHAN_AGE: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Default, Serialize)]
pub struct Vacuumed {
    /// The oldest version that stays readable.
    pub kept_from: i64,
    pub latest: i64,
    pub deleted_files: usize,
    pub deleted_bytes: u64,
    pub compacted_files: usize,
    /// The version the compaction committed.
    pub compacted_into: Option<i64>,
}

pub fn vacuum(catalog: &Catalog, collection: &str, table: &str, keep_versions: i64) -> anyhow::Result<Vacuumed> {
    anyhow::ensure!(keep_versions >= 1, "--keep-versions must be at least 1 (the latest version is always kept)");
    // Every version is in the log first (else this fails, and nothing is deleted).
    delta::sync(catalog, collection, table)?;
    let versions = catalog.versions(collection, table)?;
    let latest = versions.last().map_or(0, |v| v.version);
    let kept_from = (latest - keep_versions + 1).max(1);
    let mut done = Vacuumed { kept_from, latest, ..Vacuumed::default() };
    // Every Delta version from the oldest kept one's on stays readable, other writers' too.
    let Some(kept_delta) = versions.iter().find(|v| v.version == kept_from).and_then(|v| v.delta_version) else {
        return Ok(done);
    };
    // An Iceberg table's snapshots before the oldest kept version go first, with what only they need.
    (done.deleted_files, done.deleted_bytes) =
        tables::iceberg::vacuum(catalog, collection, table, kept_from, ORPHAN_AGE)?;
    let (store, dir) = (catalog.store(), delta::table_dir(collection, table));
    let kept = delta::replay(store, &dir, Some(kept_delta))?;
    let now = delta::replay(store, &dir, None)?;

    // (1) What no kept version reads: removed at or before the oldest kept
    // version (by weir or another writer), or named by no version at all and
    // old enough not to be a commit in the making (weir's or another writer's).
    let mut needed: HashSet<String> = kept.files.iter().map(|f| f.path.clone()).collect();
    for v in kept_delta + 1..=now.version() {
        let commit =
            delta::log::read_commit(store, &dir, v)?.with_context(|| format!("Delta version {v} is missing"))?;
        needed.extend(
            commit
                .actions
                .iter()
                .filter_map(|a| a.get("add"))
                .filter_map(|a| a["path"].as_str())
                .map(delta::log::decode_path),
        );
    }
    let mut removed: HashSet<String> = kept.removed.clone();
    removed.extend(
        versions
            .iter()
            .filter(|v| v.version <= kept_from)
            .flat_map(|v| &v.removed)
            .filter_map(|f| f.path.strip_prefix(&format!("{dir}/")).map(str::to_string)),
    );
    for entry in store.list_tree(&dir)? {
        if entry.name.starts_with("_delta_log/") {
            continue;
        }
        let old = entry.modified.elapsed().unwrap_or_default() >= ORPHAN_AGE;
        if !entry.name.ends_with(".parquet") || needed.contains(&entry.name) || !(old || removed.contains(&entry.name))
        {
            continue;
        }
        if store.delete(&format!("{dir}/{}", entry.name))? {
            done.deleted_files += 1;
            done.deleted_bytes += entry.size;
        }
    }

    // (2) The small files added before the oldest kept version, still live
    // in the log, in groups: weir's own (another writer's files are theirs to compact).
    let ours: HashMap<&str, &DataFile> = versions.iter().flat_map(|v| &v.files).map(|f| (f.path.as_str(), f)).collect();
    let small: Vec<DataFile> = now
        .files
        .iter()
        .filter(|f| f.added_in < kept_delta && f.add["size"].as_u64().unwrap_or(0) < SMALL_FILE_BYTES)
        .filter_map(|f| ours.get(format!("{dir}/{}", f.path).as_str()).map(|d| delta::with_size(store, (*d).clone())))
        .collect::<anyhow::Result<_>>()?;
    if small.len() < 2 {
        return Ok(done);
    }
    // Every compacted file has all the table's columns (nulls where its rows
    // predate one), so the newest file still names every column; but those
    // of its partition, which its partition's values give.
    let snapshot = tables::snapshot(catalog, collection, table, None)?;
    let columns = export_schema(store, &snapshot)?;
    let columns = Arc::new(Schema::new_with_metadata(
        columns
            .fields()
            .iter()
            .filter(|f| !snapshot.partition_types.contains_key(f.name()))
            .cloned()
            .collect::<Vec<_>>(),
        columns.metadata().clone(),
    ));
    // Files of one partition are compacted together, into that partition.
    let mut by_partition: Vec<Vec<DataFile>> = Vec::new();
    for file in small {
        match by_partition.iter_mut().find(|p| p[0].partition_values == file.partition_values) {
            Some(partition) => partition.push(file),
            None => by_partition.push(vec![file]),
        }
    }
    let mut groups: Vec<Vec<DataFile>> = Vec::new();
    for partition in by_partition {
        let mut bytes = 0;
        groups.push(Vec::new());
        for file in partition {
            let size = file.size;
            if bytes + size > COMPACTED_FILE_BYTES && !groups.last().expect("a group").is_empty() {
                groups.push(Vec::new());
                bytes = 0;
            }
            bytes += size;
            groups.last_mut().expect("a group").push(file);
        }
    }
    let groups: Vec<Vec<DataFile>> = groups.into_iter().filter(|g| g.len() > 1).collect();
    let mut added = Vec::new();
    for group in &groups {
        added.push(compact(store, collection, table, group, &columns)?);
    }
    let removed: Vec<DataFile> = groups.into_iter().flatten().collect();
    let version = catalog.commit_compaction(collection, table, &added, &removed);
    let version = match version {
        Ok(version) => version,
        Err(e) => {
            for file in &added {
                let _ = store.delete(&file.path);
            }
            return Err(e.into());
        }
    };
    delta::sync(catalog, collection, table)?;
    tables::iceberg::sync(catalog, collection, table)?;
    done.compacted_files = removed.len();
    done.compacted_into = Some(version);
    done.latest = version;
    Ok(done)
}

/// One file with the rows of `files`, in order, with the table's columns.
fn compact(
    store: &Store,
    collection: &str,
    table: &str,
    files: &[DataFile],
    schema: &SchemaRef,
) -> anyhow::Result<DataFile> {
    // Read as they are, without their partition's columns, which the compacted file lacks as well.
    let snapshot = Snapshot {
        version: 0,
        delta_version: 0,
        rows: files.iter().map(|f| f.rows).sum(),
        files: files
            .iter()
            .map(|f| SnapshotFile { key: f.path.clone(), partition_values: Vec::new(), size: f.size, rows: f.rows })
            .collect(),
        partition_types: Default::default(),
    };
    let values = files[0].partition_values.clone();
    let key = partition::file_key(&table_file(collection, table, "compacted", &[]), &values);
    let mut out = ParquetFile::create(&store.scratch(&key), schema, Kind::Table)?;
    let mut rows = 0;
    for batch in read_batches(store, &snapshot, schema) {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        out.write(&[batch])?;
    }
    let footer = out.finish()?;
    let size = store.upload(&key)?;
    let stats = crate::tables::stats::delta_stats(&footer, schema);
    Ok(DataFile { path: key, size, rows, stats: Some(stats), partition_values: values })
}
