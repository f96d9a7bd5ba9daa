//! Iceberg tables (`table_format = "iceberg"`): the table's data files, the
//! same files its Delta log names, described by Iceberg's metadata beside
//! them under `metadata/`: a manifest of the files each version adds, a
//! manifest list a snapshot, and a `metadata.json` a version, each snapshot
//! numbered by the weir version it holds and carrying its offsets in its
//! summary. The catalog database is the Iceberg SQL catalog: the table's
//! pointer moves in the very transaction that commits the version and its
//! offsets (`catalog::iceberg`), so an Iceberg reader sees a version exactly
//! when weir's own readers do, and a crash leaves no half-made snapshot
//! visible (files made for a commit that did not happen are orphans).
//!
//! A version's manifest list names the manifests of the versions before it,
//! kept in the catalog with each version. It starts again from one manifest
//! of every live file (a "restart") when the chain grows long, when files
//! were removed (a compaction, a reprocess), or when versions were committed
//! without Iceberg metadata (a table that was Delta only); such a manifest
//! keeps each file's snapshot and sequence number.

pub mod avro;
pub mod manifest;
pub mod schema;

use std::collections::HashSet;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::catalog::{BatchCommit, Catalog, CatalogError, DataFile, IcebergCommit, NewVersion, iceberg_namespace};
use crate::store::Store;
use crate::tables::file::table_dir;
use crate::tables::partition::{PartitionSpec, Transform};
use manifest::{EntryFile, ManifestFile};

/// A manifest list holds at most this many manifests; past it, the next
/// version's list starts again from one manifest of every live file.
const MAX_MANIFESTS: usize = 100;
/// The previous metadata files a metadata file names (Iceberg's default).
const METADATA_LOG_KEPT: usize = 100;
/// Attempts at a commit while other nodes move the table on.
const ATTEMPTS: usize = 20;

/// The manifests a version keeps in the catalog.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Kept {
    /// Its list starts here: the versions before it are not named again.
    restart: bool,
    manifests: Vec<ManifestFile>,
}

/// Where a key is, as Iceberg readers open it: a `file://` URI or the bucket's.
pub fn uri(store: &Store, key: &str) -> String {
    let location = store.location(key);
    match location.starts_with('/') {
        true => format!("file://{location}"),
        false => location,
    }
}

/// The key of a location under the table (`None`: not the table's).
fn key_of(store: &Store, collection: &str, table: &str, location: &str) -> Option<String> {
    let dir = table_dir(collection, table);
    let rest = location.strip_prefix(&uri(store, &dir))?.strip_prefix('/')?;
    Some(format!("{dir}/{rest}"))
}

/// Commits `batch` (`catalog.commit`), an Iceberg table's metadata made for
/// its version first, and made again while other commits move the table on.
pub fn commit(
    catalog: &Catalog,
    batch: &mut BatchCommit<'_>,
    iceberg: bool,
) -> anyhow::Result<Result<(i64, Option<i64>), CatalogError>> {
    for attempt in 1.. {
        for version in batch.versions.iter_mut().filter(|_| iceberg) {
            version.iceberg = None;
            // Its files are written in the commit's transaction (`IcebergCommit::write`).
            version.iceberg = Some(prepare(catalog, batch.collection, &version.table, Some(version))?);
        }
        let committed = catalog.commit(batch);
        for commit in batch.versions.iter_mut().filter_map(|v| v.iceberg.take()) {
            match &committed {
                Ok((execution, _)) => remember(commit.location.clone(), commit.into_written(Some(*execution))),
                Err(_) => commit.keys().for_each(|k| drop(catalog.store().delete(k))),
            }
        }
        match committed {
            Err(CatalogError::IcebergMoved { .. }) if attempt < ATTEMPTS => continue,
            other => return Ok(other),
        }
    }
    unreachable!("the loop returns")
}

/// Brings an Iceberg table's metadata up to its latest version when
/// versions were committed without it (a compaction, a reprocess). Returns
/// whether it moved. A table without Iceberg metadata is left as it is.
pub fn sync(catalog: &Catalog, collection: &str, table: &str) -> anyhow::Result<bool> {
    for attempt in 1.. {
        let latest = catalog.latest_version(collection, table)?;
        let Some(location) = catalog.iceberg_location(&iceberg_namespace(collection), table)? else {
            return Ok(false);
        };
        let current = load_metadata(catalog.store(), collection, table, &location)?["current-snapshot-id"].as_i64();
        if latest == 0 || current == Some(latest) {
            return Ok(false);
        }
        let commit = prepare(catalog, collection, table, None)?;
        if move_to(catalog, collection, table, commit, attempt)? {
            return Ok(true);
        }
    }
    unreachable!("the loop returns")
}

/// Writes `commit`'s files and moves the table's pointer to them (metadata
/// for a version already committed). `false`: another commit moved the table
/// on first, and this one, its files deleted, is to be made again (an error
/// after `ATTEMPTS`).
fn move_to(
    catalog: &Catalog,
    collection: &str,
    table: &str,
    commit: IcebergCommit,
    attempt: usize,
) -> anyhow::Result<bool> {
    commit.write(catalog.store(), None)?;
    match catalog.move_iceberg(collection, table, &commit) {
        Ok(()) => {
            remember(commit.location.clone(), commit.into_written(None));
            Ok(true)
        }
        Err(e) => {
            commit.keys().for_each(|k| drop(catalog.store().delete(k)));
            match e {
                CatalogError::IcebergMoved { .. } if attempt < ATTEMPTS => Ok(false),
                e => Err(e.into()),
            }
        }
    }
}

/// Expires the snapshots of versions before `before` (a vacuum's oldest kept
/// version): the files only they read may then be deleted, and no snapshot
/// the metadata still names loses one. The latest version's snapshot stays.
fn expire(catalog: &Catalog, collection: &str, table: &str, before: i64) -> anyhow::Result<usize> {
    sync(catalog, collection, table)?;
    let (store, namespace) = (catalog.store(), iceberg_namespace(collection));
    for attempt in 1.. {
        let Some(location) = catalog.iceberg_location(&namespace, table)? else { return Ok(0) };
        let mut metadata = read_metadata(store, collection, table, &location)?;
        let current = metadata["current-snapshot-id"].as_i64().unwrap_or(0);
        let expired = |s: &Value| s["snapshot-id"].as_i64().is_some_and(|id| id < before && id != current);
        let snapshots = metadata["snapshots"].as_array_mut().context("snapshots")?;
        let count = snapshots.iter().filter(|s| expired(s)).count();
        if count == 0 {
            return Ok(0);
        }
        snapshots.retain(|s| !expired(s));
        if let Some(log) = metadata["snapshot-log"].as_array_mut() {
            log.retain(|s| !expired(s));
        }
        let now = crate::catalog::now_ms();
        let previous_at = metadata["last-updated-ms"].clone();
        if let Some(log) = metadata["metadata-log"].as_array_mut() {
            log.push(json!({"timestamp-ms": previous_at, "metadata-file": location}));
            // Metadata files of the expired versions go with them.
            log.retain(|m| m["metadata-file"].as_str().and_then(version_of).is_none_or(|v| v >= before));
        }
        metadata["last-updated-ms"] = json!(now);
        let dir = table_dir(collection, table);
        let key = format!("{dir}/metadata/{current:05}-{}.metadata.json", crate::catalog::new_uuid());
        let commit = IcebergCommit {
            namespace: namespace.clone(),
            name: table.to_string(),
            expected: Some(location),
            location: uri(store, &key),
            key,
            text: serde_json::to_string(&metadata)?,
            metadata,
            files: Vec::new(),
            version: current,
            manifests: None,
        };
        if move_to(catalog, collection, table, commit, attempt)? {
            return Ok(count);
        }
    }
    unreachable!("the loop returns")
}

/// Expires the snapshots of versions before `kept_from` ([`expire`]), then
/// deletes the metadata files no kept snapshot needs: at once those of
/// versions before `kept_from` (named for their version), others (a commit
/// that did not happen) once `orphan_age` old. Returns the files and bytes deleted.
pub fn vacuum(
    catalog: &Catalog,
    collection: &str,
    table: &str,
    kept_from: i64,
    orphan_age: std::time::Duration,
) -> anyhow::Result<(usize, u64)> {
    expire(catalog, collection, table, kept_from)?;
    let (store, dir) = (catalog.store(), table_dir(collection, table));
    let Some(location) = catalog.iceberg_location(&iceberg_namespace(collection), table)? else { return Ok((0, 0)) };
    let metadata = read_metadata(store, collection, table, &location)?;
    let key = |location: &str| key_of(store, collection, table, location);
    let mut needed: HashSet<String> = key(&location).into_iter().collect();
    let logged = metadata["metadata-log"].as_array().into_iter().flatten().filter_map(|m| m["metadata-file"].as_str());
    needed.extend(logged.filter_map(key));
    let snapshots = metadata["snapshots"].as_array().context("snapshots")?;
    needed.extend(snapshots.iter().filter_map(|s| s["manifest-list"].as_str()).filter_map(key));
    // The manifests the kept snapshots' lists name: back to the restart at or before the oldest.
    let oldest = snapshots.iter().filter_map(|s| s["snapshot-id"].as_i64()).min().unwrap_or(kept_from);
    let current = metadata["current-snapshot-id"].as_i64().unwrap_or(0);
    for (version, text) in catalog.iceberg_manifests(collection, table, current, None)? {
        let kept: Kept = serde_json::from_str(&text)?;
        needed.extend(kept.manifests.iter().filter_map(|m| key(&m.location)));
        if kept.restart && version <= oldest {
            break;
        }
    }
    let (mut files, mut bytes) = (0, 0);
    for entry in store.list_tree(&format!("{dir}/metadata"))? {
        let key = format!("{dir}/metadata/{}", entry.name);
        let expired = version_of(&entry.name).is_some_and(|v| v < oldest);
        let old = entry.modified.elapsed().unwrap_or_default() >= orphan_age;
        if needed.contains(&key) || !(expired || old) {
            continue;
        }
        if store.delete(&key)? {
            (files, bytes) = (files + 1, bytes + entry.size);
        }
    }
    Ok((files, bytes))
}

/// The version a metadata file was made for, from its name
/// (`00012-….metadata.json`, `00012-…-m0.avro`, `snap-12-1-….avro`).
fn version_of(location: &str) -> Option<i64> {
    let name = location.rsplit('/').next()?;
    let name = name.strip_prefix("snap-").unwrap_or(name);
    name.split('-').next()?.parse().ok()
}

/// The table's Iceberg metadata at `location` (one of its metadata files).
pub fn metadata(catalog: &Catalog, collection: &str, table: &str, location: &str) -> anyhow::Result<Value> {
    load_metadata(catalog.store(), collection, table, location)
}

/// The metadata at `location`, to make the next from: the one this process
/// wrote there, if it is still remembered, else read from the store.
fn read_metadata(store: &Store, collection: &str, table: &str, location: &str) -> anyhow::Result<Value> {
    match remembered(location) {
        Some(metadata) => Ok(metadata),
        None => load_metadata(store, collection, table, location),
    }
}

fn load_metadata(store: &Store, collection: &str, table: &str, location: &str) -> anyhow::Result<Value> {
    let key = key_of(store, collection, table, location)
        .with_context(|| format!("Iceberg metadata {location} is not under the table's location"))?;
    let bytes = store.get(&key)?.with_context(|| format!("Iceberg metadata {location} is missing"))?;
    serde_json::from_slice(&bytes).with_context(|| format!("Iceberg metadata {location}"))
}

/// The metadata files this process wrote last, by location, parsed: the next
/// commit to a table starts from the one before it, without reading it back.
/// (A metadata file never changes: its name is new each time.)
static WRITTEN: std::sync::Mutex<std::collections::VecDeque<(String, Value)>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());
/// How many [`WRITTEN`] keeps: a node's busiest Iceberg tables.
const WRITTEN_KEPT: usize = 16;

fn remember(location: String, metadata: Value) {
    let mut written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    if written.len() >= WRITTEN_KEPT {
        written.pop_front();
    }
    written.push_back((location, metadata));
}

/// Takes the metadata at `location` from [`WRITTEN`], if it is there (a
/// commit made from it remembers its own).
fn remembered(location: &str) -> Option<Value> {
    let mut written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    let at = written.iter().position(|(l, _)| l == location)?;
    written.remove(at).map(|(_, m)| m)
}

/// Makes the table's Iceberg metadata for `new` (the version about to be
/// committed), or for the latest committed version when `new` is `None`: its
/// manifest, manifest list and metadata file, written by
/// [`IcebergCommit::write`] just before the pointer moves to them.
fn prepare(
    catalog: &Catalog,
    collection: &str,
    table: &str,
    new: Option<&NewVersion>,
) -> anyhow::Result<IcebergCommit> {
    let store = catalog.store();
    let (namespace, dir) = (iceberg_namespace(collection), table_dir(collection, table));
    let expected = catalog.iceberg_location(&namespace, table)?;
    let previous = match &expected {
        Some(l) => Some(read_metadata(store, collection, table, l)?),
        None => None,
    };
    let latest = catalog.latest_version(collection, table)?;
    let version = latest + new.is_some() as i64;
    let parent = previous.as_ref().and_then(|p| p["current-snapshot-id"].as_i64());

    // The columns: the table's Delta schema less the columns Delta derives for
    // transforms (Iceberg applies them itself), ids kept from the last schema.
    let (delta_schema, partition_by) = match new {
        Some(v) => (v.schema.clone(), v.partition_by.clone()),
        None => (
            catalog.table_schema(collection, table, latest + 1)?.context("the table has no columns yet")?,
            catalog.table_record(collection, table)?.map(|r| r.partition_by).unwrap_or_default(),
        ),
    };
    let spec = PartitionSpec::parse(&partition_by).map_err(anyhow::Error::msg)?;
    let derived: HashSet<String> =
        spec.fields.iter().filter(|f| f.transform != Transform::Identity).map(|f| f.column()).collect();
    let mut delta_schema = delta_schema;
    if let Some(fields) = delta_schema["fields"].as_array_mut() {
        fields.retain(|f| !derived.contains(f["name"].as_str().unwrap_or_default()));
    }
    let last_schema = previous.as_ref().and_then(|p| {
        let id = &p["current-schema-id"];
        p["schemas"].as_array()?.iter().find(|s| s["schema-id"] == *id).cloned()
    });
    let mut last_id = previous.as_ref().and_then(|p| p["last-column-id"].as_i64()).unwrap_or(0);
    let columns = schema::to_iceberg(&delta_schema, last_schema.as_ref(), &mut last_id)
        .with_context(|| format!("table `{table}` as an Iceberg table"))?;
    let unchanged = last_schema.as_ref().is_some_and(|s| s["fields"] == columns["fields"]);
    let schema_id = match (&last_schema, unchanged) {
        (Some(s), true) => s["schema-id"].as_i64().unwrap_or(0),
        (Some(_), false) => previous.as_ref().and_then(|p| p["schemas"].as_array()).map_or(0, |s| s.len() as i64),
        (None, _) => 0,
    };
    let spec_fields = manifest::spec_fields(&spec, &columns)?;

    // The manifests: this version's files after the chain, or every live file.
    let kept: Vec<(i64, Kept)> = match parent {
        Some(p) => catalog
            // A list holds fewer than MAX_MANIFESTS, one a version: no more rows are needed.
            .iceberg_manifests(collection, table, p, Some(MAX_MANIFESTS))?
            .into_iter()
            .map(|(v, text)| Ok((v, serde_json::from_str(&text)?)))
            .collect::<anyhow::Result<_>>()?,
        None => Vec::new(),
    };
    let mut chain: Vec<ManifestFile> = Vec::new();
    for (_, k) in &kept {
        chain.splice(0..0, k.manifests.iter().cloned());
        if k.restart {
            break;
        }
    }
    let snapshots: HashSet<i64> = previous
        .as_ref()
        .and_then(|p| p["snapshots"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|s| s["snapshot-id"].as_i64())
        .collect();
    let continues = new.is_some() && parent == Some(latest) && chain.len() < MAX_MANIFESTS;
    let entry = |file: &DataFile, added_in: i64| -> anyhow::Result<EntryFile> {
        let partition = spec_fields
            .iter()
            .map(|f| {
                let value = file.partition_values.iter().find(|(c, _)| *c == f.name).and_then(|(_, v)| v.as_deref());
                manifest::partition_value(f, value)
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(EntryFile {
            location: uri(store, &file.path),
            size: file.size,
            rows: file.rows,
            partition,
            stats: file.stats.clone(),
            added_in,
        })
    };
    let mut files: Vec<EntryFile> = Vec::new();
    if !continues {
        chain.clear();
        let versions = catalog.versions(collection, table)?;
        let removed: HashSet<&str> = versions.iter().flat_map(|v| &v.removed).map(|f| f.path.as_str()).collect();
        for v in &versions {
            // A file added by a version Iceberg never had a snapshot of is added by this one.
            let added_in = if snapshots.contains(&v.version) { v.version } else { version };
            for file in v.files.iter().filter(|f| !removed.contains(f.path.as_str())) {
                files.push(entry(file, added_in)?);
            }
        }
    }
    if let Some(v) = new {
        for file in &v.files {
            files.push(entry(file, version)?);
        }
    }
    let manifest_key = format!("{dir}/metadata/{version:05}-{}-m0.avro", crate::catalog::new_uuid());
    let (bytes, manifest) =
        manifest::manifest(&files, version, &spec_fields, &columns, schema_id, &uri(store, &manifest_key));
    chain.push(manifest.clone());
    let list_key = format!("{dir}/metadata/snap-{version}-1-{}.avro", crate::catalog::new_uuid());
    let list = manifest::manifest_list(&chain, version, parent);

    // The metadata: the previous one's, with this snapshot (and schema) added.
    let now = crate::catalog::now_ms();
    // A new table's Iceberg id is its Delta id (the table's record is read for nothing else).
    let record = match previous {
        None => catalog.table_record(collection, table)?,
        Some(_) => None,
    };
    // Without a new version: a compaction (the same rows) or a reprocess (fewer).
    let previous_total = previous.as_ref().and_then(|p| {
        let current = p["snapshots"].as_array()?.iter().find(|s| s["snapshot-id"].as_i64() == parent)?;
        current["summary"]["total-records"].as_str()?.parse::<i64>().ok()
    });
    let previous_updated = previous.as_ref().map(|p| p["last-updated-ms"].clone());
    let mut metadata = previous.unwrap_or_else(|| {
        json!({
            "format-version": 2,
            "table-uuid": record.as_ref().map_or_else(crate::catalog::new_uuid, |r| r.delta_id.clone()),
            "location": uri(store, &dir),
            "schemas": [],
            "partition-specs": [{"spec-id": 0, "fields": manifest::spec_json(&spec_fields)}],
            "default-spec-id": 0,
            "last-partition-id": manifest::FIRST_PARTITION_ID - 1 + spec_fields.len() as i64,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "default-sort-order-id": 0,
            "properties": {},
            "snapshots": [],
            "snapshot-log": [],
            "metadata-log": [],
        })
    });
    if !unchanged {
        metadata["schemas"].as_array_mut().context("schemas")?.push(manifest::with_id(&columns, schema_id));
    }
    metadata["current-schema-id"] = json!(schema_id);
    metadata["last-column-id"] = json!(last_id);
    metadata["properties"]["schema.name-mapping.default"] = json!(schema::name_mapping(&columns).to_string());
    let total_files = chain.iter().map(|m| (m.added_files + m.existing_files) as i64).sum::<i64>();
    let total_rows = chain.iter().map(|m| m.added_rows + m.existing_rows).sum::<i64>();
    let added = new.map_or((0, 0), |v| (v.files.len(), v.rows));
    let operation = match (new, previous_total) {
        (Some(_), _) => "append",
        (None, Some(total)) if total == total_rows => "replace",
        (None, _) => "overwrite",
    };
    let mut summary = json!({
        "operation": operation,
        "added-data-files": added.0.to_string(),
        "added-records": added.1.to_string(),
        "total-data-files": total_files.to_string(),
        "total-records": total_rows.to_string(),
        "total-delete-files": "0",
        "total-position-deletes": "0",
        "total-equality-deletes": "0",
        "weir.version": version.to_string(),
    });
    if let Some(v) = new {
        let offsets: serde_json::Map<String, Value> =
            v.txns.iter().map(|t| (t.app_id.clone(), json!(t.version))).collect();
        summary["weir.offsets"] = json!(Value::Object(offsets).to_string());
        summary["weir.execution"] = json!(crate::catalog::PENDING_EXECUTION);
    }
    let mut snapshot = json!({
        "snapshot-id": version,
        "sequence-number": version,
        "timestamp-ms": now,
        "manifest-list": uri(store, &list_key),
        "summary": summary,
        "schema-id": schema_id,
    });
    if let Some(p) = parent {
        snapshot["parent-snapshot-id"] = json!(p);
    }
    metadata["snapshots"].as_array_mut().context("snapshots")?.push(snapshot);
    metadata["snapshot-log"]
        .as_array_mut()
        .context("snapshot-log")?
        .push(json!({"timestamp-ms": now, "snapshot-id": version}));
    if let (Some(location), Some(at)) = (&expected, previous_updated) {
        let log = metadata["metadata-log"].as_array_mut().context("metadata-log")?;
        log.push(json!({"timestamp-ms": at, "metadata-file": location}));
        // As Iceberg's `write.metadata.previous-versions-max`: the earlier files are not named again.
        log.drain(..log.len().saturating_sub(METADATA_LOG_KEPT));
    }
    metadata["current-snapshot-id"] = json!(version);
    metadata["refs"] = json!({"main": {"snapshot-id": version, "type": "branch"}});
    metadata["last-sequence-number"] = json!(version);
    metadata["last-updated-ms"] = json!(now);
    let metadata_key = format!("{dir}/metadata/{version:05}-{}.metadata.json", crate::catalog::new_uuid());

    let kept = Kept { restart: !continues, manifests: vec![manifest] };
    let commit = IcebergCommit {
        namespace,
        name: table.to_string(),
        expected,
        location: uri(store, &metadata_key),
        key: metadata_key,
        text: serde_json::to_string(&metadata)?,
        metadata,
        files: vec![(manifest_key, bytes.into()), (list_key, list.into())],
        version,
        manifests: Some(serde_json::to_string(&kept)?),
    };
    Ok(commit)
}
