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
//! ever loses a file it reads.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;

use crate::catalog::{Catalog, DataFile, TableVersion};
use crate::stage::{ParquetFile, table_file};
use crate::store::Store;
use arrow::datatypes::SchemaRef;

use crate::tables::{self, Snapshot, delta, export_schema, read_batches};

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
    delta::sync(catalog, collection, table)?;
    let versions = catalog.versions(collection, table)?;
    let latest = versions.last().map_or(0, |v| v.version);
    let kept_from = (latest - keep_versions + 1).max(1);
    let mut done = Vacuumed { kept_from, latest, ..Vacuumed::default() };

    // (1) What no kept version reads.
    let store = catalog.store();
    let mut doomed: Vec<String> = versions
        .iter()
        .filter(|v| v.version <= kept_from)
        .flat_map(|v| v.removed.iter().map(|f| f.path.clone()))
        .collect();
    doomed.extend(orphans(store, &delta::table_dir(collection, table), &versions)?);
    for key in doomed {
        if let Some(size) = store.size(&key)? {
            store.delete(&key)?;
            done.deleted_files += 1;
            done.deleted_bytes += size;
        }
    }

    // (2) The small files added before the oldest kept version, still live, in groups.
    let small: Vec<DataFile> = delta::live_files(&versions)
        .into_iter()
        .filter(|(added_by, _)| added_by.version < kept_from)
        .map(|(_, f)| delta::with_size(store, f))
        .filter(|f| f.as_ref().map_or(true, |f| f.size < SMALL_FILE_BYTES))
        .collect::<anyhow::Result<_>>()?;
    if small.len() < 2 {
        return Ok(done);
    }
    // Every compacted file has all the table's columns (nulls where its rows
    // predate one), so the newest file still names every column.
    let columns = export_schema(store, &tables::snapshot(catalog, collection, table, None)?)?;
    let mut groups: Vec<Vec<DataFile>> = vec![Vec::new()];
    let mut bytes = 0;
    for file in small {
        let size = file.size;
        if bytes + size > COMPACTED_FILE_BYTES && !groups.last().expect("a group").is_empty() {
            groups.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        groups.last_mut().expect("a group").push(file);
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
    let snapshot = Snapshot {
        version: 0,
        rows: files.iter().map(|f| f.rows).sum(),
        files: files.iter().map(|f| f.path.clone()).collect(),
    };
    let key = table_file(collection, table, "compacted", &[]);
    let mut out = ParquetFile::create(&store.scratch(&key), schema, crate::stage::Kind::Table)?;
    let mut rows = 0;
    for batch in read_batches(store, &snapshot, schema) {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        out.write(&[batch])?;
    }
    let footer = out.finish()?;
    let size = store.upload(&key)?;
    let stats = crate::tables::stats::delta_stats(&footer, schema);
    Ok(DataFile { path: key, size, rows, stats: Some(stats) })
}

/// Parquet files in the table's directory that no version names, old enough
/// not to be a batch in the middle of its commit.
fn orphans(store: &Store, table_dir: &str, versions: &[TableVersion]) -> anyhow::Result<Vec<String>> {
    let named: HashSet<&str> =
        versions.iter().flat_map(|v| v.files.iter().chain(&v.removed)).map(|f| f.path.as_str()).collect();
    let mut found = Vec::new();
    for entry in store.list(table_dir)? {
        let key = format!("{table_dir}/{}", entry.name);
        let old = entry.modified.elapsed().unwrap_or_default() >= ORPHAN_AGE;
        if entry.name.ends_with(".parquet") && !named.contains(key.as_str()) && old {
            found.push(key);
        }
    }
    Ok(found)
}
