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
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

use crate::catalog::{Catalog, DataFile, TableVersion};
use crate::stage::{ParquetFile, table_file};
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
    let data_dir = catalog.data_dir();
    let mut doomed: Vec<String> = versions
        .iter()
        .filter(|v| v.version <= kept_from)
        .flat_map(|v| v.removed.iter().map(|f| f.path.clone()))
        .collect();
    doomed.extend(orphans(data_dir, &delta::table_dir(collection, table), &versions)?);
    for path in doomed {
        let path = data_dir.join(path);
        if let Ok(meta) = std::fs::metadata(&path) {
            std::fs::remove_file(&path).with_context(|| format!("deleting {}", path.display()))?;
            done.deleted_files += 1;
            done.deleted_bytes += meta.len();
        }
    }

    // (2) The small files added before the oldest kept version, still live, in groups.
    let small: Vec<DataFile> = delta::live_files(&versions)
        .into_iter()
        .filter(|(added_by, _)| added_by.version < kept_from)
        .map(|(_, f)| delta::with_size(data_dir, f))
        .filter(|f| f.as_ref().map_or(true, |f| f.size < SMALL_FILE_BYTES))
        .collect::<anyhow::Result<_>>()?;
    if small.len() < 2 {
        return Ok(done);
    }
    // Every compacted file has all the table's columns (nulls where its rows
    // predate one), so the newest file still names every column.
    let columns = export_schema(&tables::snapshot(catalog, collection, table, None)?)?;
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
        added.push(compact(data_dir, collection, table, group, &columns)?);
    }
    let removed: Vec<DataFile> = groups.into_iter().flatten().collect();
    let version = catalog.commit_compaction(collection, table, &added, &removed);
    let version = match version {
        Ok(version) => version,
        Err(e) => {
            for file in &added {
                let _ = std::fs::remove_file(data_dir.join(&file.path));
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
    data_dir: &Path,
    collection: &str,
    table: &str,
    files: &[DataFile],
    schema: &SchemaRef,
) -> anyhow::Result<DataFile> {
    let snapshot = Snapshot {
        version: 0,
        rows: files.iter().map(|f| f.rows).sum(),
        files: files.iter().map(|f| data_dir.join(&f.path)).collect(),
    };
    let path = table_file(collection, table, "compacted", &[]);
    let mut out = ParquetFile::create(&data_dir.join(&path), schema, crate::stage::Kind::Table)?;
    let mut rows = 0;
    for batch in read_batches(&snapshot, schema) {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        out.write(&[batch])?;
    }
    let footer = out.finish()?;
    let size = std::fs::metadata(data_dir.join(&path))?.len();
    let stats = crate::tables::stats::delta_stats(&footer, schema);
    Ok(DataFile { path: path.display().to_string(), size, rows, stats: Some(stats) })
}

/// Parquet files in the table's directory that no version names, old enough
/// not to be a batch in the middle of its commit.
fn orphans(data_dir: &Path, table_dir: &Path, versions: &[TableVersion]) -> anyhow::Result<Vec<String>> {
    let named: HashSet<&str> =
        versions.iter().flat_map(|v| v.files.iter().chain(&v.removed)).map(|f| f.path.as_str()).collect();
    let dir = data_dir.join(table_dir);
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = table_dir.join(&name).display().to_string();
        let old = entry.metadata()?.modified()?.elapsed().unwrap_or_default() >= ORPHAN_AGE;
        if name.ends_with(".parquet") && !named.contains(path.as_str()) && old {
            found.push(path);
        }
    }
    Ok(found)
}
