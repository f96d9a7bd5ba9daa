//! Running a publisher again over what it already ingested: one new table
//! version removes every row committed after version N, and the publisher's
//! offsets move back to where version N left them, in one transaction. The
//! worker then reads those messages again (with a fixed plugin, say), and
//! the catalog's compare-and-set keeps any batch read before the move from
//! committing after it.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::db::{Migration, args};
use super::{Catalog, CatalogError, DataFile, Execution, PartitionRange, Timings, Txn, lock_table, now_ms};

/// 8: the rows a version removes from its table (a reprocess), so a table's
/// row count stays the sum over its versions.
pub const REMOVED_ROWS_MIGRATION: Migration = Migration {
    sqlite: "ALTER TABLE table_versions ADD COLUMN removed_rows INTEGER NOT NULL DEFAULT 0;",
    postgres: "ALTER TABLE table_versions ADD COLUMN removed_rows BIGINT NOT NULL DEFAULT 0;",
};

/// What a reprocess from version N does, worked out before it is committed.
#[derive(Debug, Clone, Serialize)]
pub struct ReprocessPlan {
    pub from_version: i64,
    /// The table's latest version when it was worked out: the commit is
    /// refused if another version came meanwhile.
    pub latest_version: i64,
    /// Where each partition resumes: where version N left it, or where the
    /// publisher first read it, for a partition first read after version N.
    pub offsets: BTreeMap<i32, i64>,
    /// The live files versions after N added.
    #[serde(skip)]
    pub removed: Vec<DataFile>,
    pub removed_rows: u64,
    pub removed_versions: Vec<i64>,
}

/// Why a reprocess cannot be done as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReprocessError {
    #[error("table `{table}` has no version {version}: its versions are 1 to {latest}")]
    NoVersion { table: String, version: i64, latest: i64 },
    #[error("version {version} is table `{table}`'s latest: there is nothing after it to reprocess")]
    Nothing { table: String, version: i64 },
    #[error(
        "version {compaction} of table `{table}` compacted files of versions up to {from} together with later ones, so their rows cannot be told apart: reprocess from version {compaction} or later"
    )]
    Compacted { table: String, from: i64, compaction: i64 },
    #[error("another version of table `{table}` was committed meanwhile: ask again")]
    Moved { table: String },
    #[error(
        "version {reprocess} of table `{table}` already reprocessed what came after version {from}: reprocess from version {reprocess} or later"
    )]
    Reprocessed { table: String, from: i64, reprocess: i64 },
}

impl Catalog {
    /// Works out a reprocess of `publisher`'s table from `from_version`.
    pub fn reprocess_plan(
        &self,
        collection: &str,
        table: &str,
        publisher: &str,
        from_version: i64,
    ) -> Result<Result<ReprocessPlan, ReprocessError>, CatalogError> {
        let versions = self.versions(collection, table)?;
        let latest = versions.last().map_or(0, |v| v.version);
        if from_version < 0 || from_version > latest {
            return Ok(Err(ReprocessError::NoVersion { table: table.into(), version: from_version, latest }));
        }
        if from_version == latest {
            return Ok(Err(ReprocessError::Nothing { table: table.into(), version: from_version }));
        }
        let kept: HashSet<&str> = versions
            .iter()
            .filter(|v| v.version <= from_version)
            .flat_map(|v| v.files.iter().map(|f| f.path.as_str()))
            .collect();
        let mut live: Vec<&DataFile> = Vec::new();
        let mut gone: HashSet<&str> = HashSet::new();
        for v in &versions {
            if v.version > from_version && v.removed_rows > 0 {
                return Ok(Err(ReprocessError::Reprocessed {
                    table: table.into(),
                    from: from_version,
                    reprocess: v.version,
                }));
            }
            if v.version > from_version && v.removed.iter().any(|f| kept.contains(f.path.as_str())) {
                // A compaction after N that took in files of N or before.
                return Ok(Err(ReprocessError::Compacted {
                    table: table.into(),
                    from: from_version,
                    compaction: v.version,
                }));
            }
            gone.extend(v.removed.iter().map(|f| f.path.as_str()));
            live.extend(v.files.iter());
        }
        let removed: Vec<DataFile> = live
            .into_iter()
            .filter(|f| !gone.contains(f.path.as_str()) && !kept.contains(f.path.as_str()))
            .cloned()
            .collect();
        let after: HashSet<i64> =
            versions.iter().filter(|v| v.version > from_version).filter_map(|v| v.execution).collect();
        let first_after = after.iter().min().copied().unwrap_or(i64::MAX);
        let mut offsets: BTreeMap<i32, i64> = BTreeMap::new();
        let mut later: BTreeMap<i32, i64> = BTreeMap::new();
        for e in self.executions(publisher)? {
            let before = match e.table_version {
                Some(v) => v <= from_version,
                None => e.id < first_after,
            };
            if e.status == "reprocess" && before {
                // An earlier reprocess moved every partition back.
                offsets = e.offsets.iter().map(|r| (r.partition, r.first)).collect();
                continue;
            }
            if e.status != "committed" {
                continue;
            }
            for r in &e.offsets {
                if before {
                    let next = offsets.entry(r.partition).or_insert(r.last + 1);
                    *next = (*next).max(r.last + 1);
                } else {
                    let first = later.entry(r.partition).or_insert(r.first);
                    *first = (*first).min(r.first);
                }
            }
        }
        for (partition, first) in later {
            offsets.entry(partition).or_insert(first);
        }
        Ok(Ok(ReprocessPlan {
            from_version,
            latest_version: latest,
            offsets,
            removed_rows: removed.iter().map(|f| f.rows).sum(),
            removed,
            removed_versions: versions.iter().map(|v| v.version).filter(|v| *v > from_version).collect(),
        }))
    }

    /// Commits `plan` in one transaction: the version that removes its files
    /// (with the offsets it moves back to as its Delta transaction ids), the
    /// offsets, the dead letters kept from the messages to be read again
    /// (they will be read again too), and the publisher's plugin when
    /// `plugin` names a new one; the publisher is marked updated, so every
    /// node restarts its worker. Returns the new version.
    #[allow(clippy::too_many_arguments)]
    pub fn commit_reprocess(
        &self,
        collection: &str,
        table: &str,
        publisher_id: i64,
        publisher: &str,
        topic: &str,
        plan: &ReprocessPlan,
        plugin: Option<&str>,
    ) -> Result<Result<i64, ReprocessError>, CatalogError> {
        let now = now_ms();
        let execution = Execution {
            id: 0,
            publisher: publisher.into(),
            status: "reprocess".into(),
            rollover_reason: "reprocess".into(),
            rows_in: 0,
            rows_out: 0,
            dead_letters: 0,
            offsets: plan
                .offsets
                .iter()
                .map(|(&partition, &next)| PartitionRange { partition, first: next, last: next - 1, expected: None })
                .collect(),
            table_version: None,
            started_at_ms: now,
            timings_ms: Timings::default(),
            plugin_log: serde_json::json!({ "reprocess": plan }),
            error: None,
        };
        let txns: Vec<Txn> = plan
            .offsets
            .iter()
            .map(|(partition, next)| Txn { app_id: Txn::app_id(publisher, topic, *partition), version: *next })
            .collect();
        self.db.transaction(|tx| {
            let table_id = lock_table(tx, collection, table)?;
            let latest: i64 = tx
                .query_one("SELECT COALESCE(MAX(version), 0) FROM table_versions WHERE table_id = ?1", args![table_id])?
                .get(0)?;
            if latest != plan.latest_version {
                return Ok(Err(ReprocessError::Moved { table: table.into() }));
            }
            let execution_id = super::executions::insert_execution(tx, &execution)?;
            let version = latest + 1;
            tx.execute(
                "INSERT INTO table_versions (table_id, version, rows, files, execution_id, created_at_ms, txns, removed, removed_rows)
                 VALUES (?1, ?2, 0, '[]', ?3, ?4, ?5, ?6, ?7)",
                args![
                    table_id,
                    version,
                    execution_id,
                    now,
                    serde_json::to_string(&txns).expect("json"),
                    serde_json::to_string(&plan.removed).expect("json"),
                    plan.removed_rows as i64
                ],
            )?;
            tx.execute("UPDATE executions SET table_version = ?1 WHERE id = ?2", args![version, execution_id])?;
            for (&partition, &next) in &plan.offsets {
                tx.execute(
                    "INSERT INTO source_offsets (publisher, topic, partition, next_offset) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (publisher, topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
                    args![publisher, topic, partition, next],
                )?;
                tx.execute(
                    "DELETE FROM dead_letters WHERE publisher = ?1 AND topic = ?2 AND partition = ?3 AND \"offset\" >= ?4",
                    args![publisher, topic, partition, next],
                )?;
            }
            match plugin {
                Some(plugin) => tx.execute(
                    "UPDATE publishers SET plugin_sha256 = ?1, updated_at_ms = ?2 WHERE id = ?3",
                    args![plugin, now, publisher_id],
                )?,
                None => tx.execute("UPDATE publishers SET updated_at_ms = ?1 WHERE id = ?2", args![now, publisher_id])?,
            };
            Ok(Ok(version))
        })
    }
}
