//! The catalog: tables and their versions, the source offsets that produced
//! them, executions and stored dead letters. The embedded default is SQLite
//! (WAL) in the data directory, parquet files beside it; several nodes share
//! one on PostgreSQL (`weir serve --catalog postgres://…`). The same
//! statements run on both (see `db`); `tests/catalog.rs` holds both to one
//! contract.
//!
//! The catalog's offsets are the source of truth for where each partition
//! resumes. A table version and the offsets past its input are written in one
//! transaction, and only if the offsets are still where the batch started
//! (compare-and-set), so two workers that both read a partition around a
//! rebalance can never both commit it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::formats::DeadLetter;
use crate::secrets::{Keyring, SecretError, default_key_file};
use evolve::evolve;
pub use reprocess::{ReprocessError, ReprocessPlan};

mod control;
mod db;
mod dead_letters;
pub mod evolve;
mod executions;
mod group_commit;
mod iceberg;
mod migrations;
mod nodes;
mod plugins;
mod reprocess;
mod sealed;
mod versions;
pub use control::{Collection, PublisherRecord, Quotas, Tenant, TokenInfo, scope};
use db::{Db, Sql, args};
pub use dead_letters::DeadLetterFilter;
pub use iceberg::{CATALOG_NAME, IcebergCommit, PENDING_EXECUTION, namespace as iceberg_namespace};
pub use nodes::NodeRecord;
pub use plugins::{ModuleFacts, PluginModule, valid_plugin_name};
pub use sealed::Rotation;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog database: {message}")]
    Sql { message: String, unique_violation: bool },
    #[error("catalog directory {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// Another worker committed this partition since the batch started: the
    /// batch must be dropped and the partition re-read from the catalog.
    #[error(
        "partition {partition} of `{topic}` moved on: the catalog has offset {found:?}, the batch started at {expected:?}"
    )]
    ConflictingOffsets { topic: String, partition: i32, expected: Option<i64>, found: Option<i64> },
    /// The batch holds offsets that are already committed: committing it would
    /// write them twice.
    #[error(
        "partition {partition} of `{topic}`: the batch starts at offset {first}, but everything before {next} is already committed"
    )]
    OverlapsCommitted { topic: String, partition: i32, first: i64, next: i64 },
    #[error("{0} already exists")]
    Exists(String),
    /// A re-run's dead letter is no longer kept: another re-run committed it.
    #[error(
        "dead letter {partition}/{offset} of `{topic}` is no longer kept: another re-run committed it, so this one commits nothing"
    )]
    RerunGone { topic: String, partition: i32, offset: i64 },
    /// The batch's columns cannot become a version of its table.
    #[error(transparent)]
    Schema(#[from] evolve::SchemaMismatch),
    #[error(transparent)]
    Secrets(#[from] SecretError),
    /// The batch is partitioned otherwise than its table.
    #[error(
        "table `{table}` is {}, and the batch {}: a table's partitioning does not change once it has data. Declare partition_by = {table_has:?} again, or write a new table (another topic or collection) partitioned the new way",
        partitioned(table_has),
        partitioned(batch_has)
    )]
    Partitioning { table: String, table_has: Vec<String>, batch_has: Vec<String> },
    /// The table's Iceberg metadata moved on since this commit's was made from
    /// it (another node committed): made again from the new one, it commits.
    #[error("Iceberg table `{table}` moved on while this commit was made; it is made again")]
    IcebergMoved { table: String },
    /// A file the commit writes in its transaction could not be written.
    #[error("{0:#}")]
    Store(anyhow::Error),
}

/// The offsets of one partition a batch covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PartitionRange {
    pub partition: i32,
    pub first: i64,
    pub last: i64,
    /// The catalog's next offset when the batch began (`None`: no offset stored yet).
    #[serde(skip)]
    pub expected: Option<i64>,
}

/// A new table version.
#[derive(Debug, Clone)]
pub struct NewVersion {
    pub table: String,
    pub files: Vec<DataFile>,
    pub rows: u64,
    /// The batch's columns, as a Delta schema: the first version's set the
    /// table's; a later one may add columns ([`evolve()`]).
    pub schema: serde_json::Value,
    /// Where each partition the batch read resumes, as Delta transaction ids.
    pub txns: Vec<Txn>,
    /// The table's partitioning (`tables::partition`), set by its first version.
    pub partition_by: Vec<String>,
    /// Its Iceberg metadata, made for this version (an Iceberg table): current once it commits.
    pub iceberg: Option<IcebergCommit>,
}

/// One data file of a table version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct DataFile {
    /// Its key in the store (a path relative to the data directory, by default).
    pub path: String,
    pub size: u64,
    pub rows: u64,
    /// Its statistics, as the Delta `add` action's `stats` (JSON text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    /// Its partition in a partitioned table: each partition column and its
    /// value as the Delta log has it (`None`: null).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_values: crate::tables::partition::PartitionValues,
}

/// A Delta transaction identifier: the application (a publisher reading one
/// partition of one topic) and how far it has come (the partition's next offset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Txn {
    #[serde(rename = "appId")]
    pub app_id: String,
    pub version: i64,
}

impl Txn {
    /// The application of `publisher` reading `partition` of `topic`.
    pub fn app_id(publisher: &str, topic: &str, partition: i32) -> String {
        format!("{publisher}/{topic}/{partition}")
    }
}

/// By `(publisher, topic)`, each partition's next offset (see [`Catalog::all_offsets`]).
pub type OffsetsByPublisher = BTreeMap<(String, String), BTreeMap<i32, i64>>;

/// What a closed batch became.
#[derive(Debug, Clone, Serialize)]
pub struct Execution {
    pub id: i64,
    pub publisher: String,
    pub status: String,
    pub rollover_reason: String,
    pub rows_in: u64,
    pub rows_out: u64,
    pub dead_letters: u64,
    pub offsets: Vec<PartitionRange>,
    pub table_version: Option<i64>,
    pub started_at_ms: i64,
    pub timings_ms: Timings,
    pub plugin_log: serde_json::Value,
    pub error: Option<String>,
}

/// Where a batch's time went, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct Timings {
    /// The summed time of its decoded runs (most of them decoded while the batch
    /// filled), plus making the plugin's frames, which happens inside its call.
    pub decode: f64,
    /// Writing the batch to its staged files, which only a failed attempt does
    /// (its retries read them back): 0 for a batch committed at the first attempt.
    pub stage: f64,
    /// Dead letters out, then the plugin call, in wall time; the table's file
    /// is written during the call, as the plugin's output arrives.
    pub publish: f64,
    /// The part of `publish` spent writing the table's file: the host's work,
    /// not the plugin's. Absent from executions recorded before it was kept.
    #[serde(default)]
    pub write: f64,
    /// The CPU time the plugin call itself used (instantiating, the guest, copying
    /// the batch in and out, checking the output): its cost, apart from the time
    /// it waited for a core. Absent from executions recorded before it was kept.
    #[serde(default)]
    pub plugin_cpu: f64,
    pub commit: f64,
    /// Writing the version's Delta commit (and a checkpoint, when one is due),
    /// after the catalog's. Absent from executions recorded before it was kept.
    #[serde(default)]
    pub log: f64,
}

/// One committed version of a table.
#[derive(Debug, Clone, Serialize)]
pub struct TableVersion {
    pub version: i64,
    pub rows: u64,
    pub files: Vec<DataFile>,
    /// The batch's execution; `None` for a version that compacts files.
    pub execution: Option<i64>,
    pub created_at_ms: i64,
    /// Files this version removes: compacted into `files` (the same rows).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<DataFile>,
    /// Rows this version removes from the table (a reprocess removing what
    /// versions after the one it went back to added).
    #[serde(skip_serializing_if = "is_zero")]
    pub removed_rows: u64,
    /// The table's Delta schema, when this version set or changed it.
    #[serde(skip)]
    pub schema: Option<serde_json::Value>,
    #[serde(skip)]
    pub txns: Vec<Txn>,
    /// The Delta version that holds it; `None` until it is in the table's log.
    pub delta_version: Option<i64>,
}

/// A table's identity, for its Delta log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRecord {
    /// The Delta table id (a UUID).
    pub delta_id: String,
    pub created_at_ms: i64,
    /// Its partitioning, in `partition_by`'s words (empty: none).
    pub partition_by: Vec<String>,
}

/// A table and how far it has come.
#[derive(Debug, Clone, Serialize)]
pub struct TableSummary {
    pub name: String,
    pub versions: i64,
    pub latest_version: Option<i64>,
    pub rows: u64,
    pub updated_at_ms: Option<i64>,
}

/// A dead letter kept in the catalog (when the source has no dead-letter topic).
#[derive(Debug, Clone, Serialize)]
pub struct StoredDeadLetter {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub error: String,
    pub execution: i64,
    /// When its batch was processed (ms since the epoch).
    pub at_ms: i64,
}

/// Everything one batch commits, atomically.
pub struct BatchCommit<'a> {
    pub collection: &'a str,
    pub publisher: &'a str,
    pub topic: &'a str,
    /// The versions it makes: one a table it wrote rows to (none when it wrote
    /// none); the execution is numbered with the first.
    pub versions: Vec<NewVersion>,
    pub ranges: &'a [PartitionRange],
    pub execution: &'a Execution,
    /// Dead letters to keep in the catalog (empty when they went to a topic).
    pub dead_letters: &'a [DeadLetter],
    /// Kept dead letters of `topic` (partition, offset) this batch re-ran:
    /// removed with the commit, which fails unless every one is still kept,
    /// so a dead letter is re-run into the table at most once.
    pub rerun: &'a [(i32, i64)],
}

pub struct Catalog {
    db: Db,
    data_dir: PathBuf,
    /// Where the files its versions name live (their paths are keys in it).
    store: crate::store::Store,
    /// The key connections are sealed under; taken after the database where both are.
    secrets: RwLock<Keyring>,
}

/// The table's id, its row locked to the end of the transaction: of two nodes
/// committing versions of one table at once, the second waits for the first,
/// then numbers its version after the first's instead of colliding with it.
/// (PostgreSQL; SQLite's write transactions run one at a time anyway.)
fn partitioned(by: &[String]) -> String {
    match by.is_empty() {
        true => "not partitioned".into(),
        false => format!("partitioned by {by:?}"),
    }
}

/// A table's partitioning, as its first version set it (none for tables from before weir partitioned).
fn table_partitioning(sql: &mut dyn Sql, table_id: i64) -> Result<Vec<String>, CatalogError> {
    let text: Option<String> =
        sql.query_one("SELECT partition_by FROM tables WHERE id = ?1", args![table_id])?.get(0)?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default())
}

fn lock_table(tx: &mut dyn Sql, collection: &str, table: &str) -> Result<i64, CatalogError> {
    tx.query_one(
        "UPDATE tables SET id = id WHERE collection = ?1 AND name = ?2 RETURNING id",
        args![collection, table],
    )?
    .get(0)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as i64
}

impl Catalog {
    /// Opens (creating and migrating as needed) the catalog in `data_dir`,
    /// with the secret key in the data directory (generated when missing).
    pub fn open(data_dir: &Path) -> Result<Self, CatalogError> {
        let (keyring, _) = Keyring::open(&default_key_file(data_dir), true)?;
        Self::open_with_key(data_dir, keyring)
    }

    /// Opens the SQLite catalog in `data_dir` with connections sealed under
    /// `keyring`'s key: any stored in clear by an earlier weir are sealed now,
    /// and a key rotation cut short is finished.
    pub fn open_with_key(data_dir: &Path, keyring: Keyring) -> Result<Self, CatalogError> {
        Self::open_at(None, data_dir, keyring)
    }

    /// Opens the catalog at `url` (`postgres://USER@HOST/DB`: a PostgreSQL
    /// server several nodes share), or, with none, SQLite in `data_dir`.
    pub fn open_at(url: Option<&str>, data_dir: &Path, keyring: Keyring) -> Result<Self, CatalogError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|source| CatalogError::Io { path: data_dir.to_path_buf(), source })?;
        let db = match url {
            None => db::open_sqlite(&data_dir.join("catalog.db"), migrations::MIGRATIONS)?,
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                db::postgres::open(url, migrations::MIGRATIONS)?
            }
            Some(url) => {
                return Err(CatalogError::Sql {
                    message: format!(
                        "`{url}` is not a catalog weir can open: give a PostgreSQL URL (postgres://USER@HOST:PORT/DB), \
                         or none for SQLite in the data directory"
                    ),
                    unique_violation: false,
                });
            }
        };
        let store = crate::store::Store::local(data_dir);
        let catalog = Self { db, data_dir: data_dir.to_path_buf(), store, secrets: RwLock::new(keyring) };
        catalog.reseal()?;
        Ok(catalog)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The same catalog, its tables' files in `store` (by default, the data directory).
    pub fn with_store(self, store: crate::store::Store) -> Self {
        Self { store, ..self }
    }

    /// Where the tables' files and logs, and the uploaded modules, live.
    pub fn store(&self) -> &crate::store::Store {
        &self.store
    }

    /// Which database holds it: `SQLite` or `PostgreSQL`.
    pub fn database(&self) -> &'static str {
        self.db.kind()
    }

    /// Where each partition resumes, for every publisher and topic.
    pub fn all_offsets(&self) -> Result<OffsetsByPublisher, CatalogError> {
        let rows =
            self.db.run(|sql| sql.query("SELECT publisher, topic, partition, next_offset FROM source_offsets", &[]))?;
        let mut offsets = OffsetsByPublisher::new();
        for r in &rows {
            offsets.entry((r.get(0)?, r.get(1)?)).or_default().insert(r.get(2)?, r.get(3)?);
        }
        Ok(offsets)
    }

    /// Where each partition of `topic` resumes for `publisher`.
    pub fn offsets(&self, publisher: &str, topic: &str) -> Result<BTreeMap<i32, i64>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                "SELECT partition, next_offset FROM source_offsets WHERE publisher = ?1 AND topic = ?2",
                args![publisher, topic],
            )
        })?;
        rows.iter().map(|r| Ok((r.get(0)?, r.get(1)?))).collect()
    }

    /// Moves a source position that no version goes with (a change log's
    /// snapshot begun, an idle slot acknowledged), compare-and-set like a
    /// commit's: from `expected` (`None`: none stored) to `next`.
    pub fn set_position(
        &self,
        publisher: &str,
        topic: &str,
        partition: i32,
        expected: Option<i64>,
        next: i64,
    ) -> Result<(), CatalogError> {
        self.db.transaction(|tx| match move_offset(tx, publisher, topic, partition, expected, next)? {
            Ok(()) => Ok(()),
            Err(found) => Err(CatalogError::ConflictingOffsets { topic: topic.into(), partition, expected, found }),
        })
    }

    /// Commits a batch: its execution, its table versions, its dead letters and
    /// the offsets past it, in one transaction, or nothing. Returns the
    /// execution's id and the (first) new version's number.
    pub fn commit(&self, batch: &BatchCommit<'_>) -> Result<(i64, Option<i64>), CatalogError> {
        self.db.transaction(|tx| {
            for range in batch.ranges {
                advance(tx, batch, range)?;
            }
            for &(partition, offset) in batch.rerun {
                let removed = tx.execute(
                    "DELETE FROM dead_letters WHERE publisher = ?1 AND topic = ?2 AND partition = ?3 AND \"offset\" = ?4",
                    args![batch.publisher, batch.topic, partition, offset],
                )?;
                if removed != 1 {
                    return Err(CatalogError::RerunGone { topic: batch.topic.to_string(), partition, offset });
                }
            }
            let execution_id = executions::insert_execution(tx, batch.execution)?;
            let mut version_number = None;
            for version in &batch.versions {
                let partition_by = serde_json::to_string(&version.partition_by).expect("json");
                tx.execute(
                    "INSERT INTO tables (collection, name, delta_id, created_at_ms, partition_by) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (collection, name) DO NOTHING",
                    args![batch.collection, &version.table, new_uuid(), now_ms(), &partition_by],
                )?;
                let table_id = lock_table(tx, batch.collection, &version.table)?;
                let table_has = table_partitioning(tx, table_id)?;
                if table_has != version.partition_by {
                    return Err(CatalogError::Partitioning {
                        table: version.table.clone(),
                        table_has,
                        batch_has: version.partition_by.clone(),
                    });
                }
                let next: i64 = tx
                    .query_one(
                        "SELECT COALESCE(MAX(version), 0) + 1 FROM table_versions WHERE table_id = ?1",
                        args![table_id],
                    )?
                    .get(0)?;
                // The batch's columns against the table's, in the same transaction, so two
                // workers can never each add a column the other's version drops (the second
                // to insert version `next` fails on the table's primary key).
                let current: Option<String> = tx
                    .query_opt(
                        "SELECT schema FROM table_versions WHERE table_id = ?1 AND schema IS NOT NULL
                         ORDER BY version DESC LIMIT 1",
                        args![table_id],
                    )?
                    .map(|r| r.get(0))
                    .transpose()?;
                let current = current.and_then(|s| serde_json::from_str(&s).ok());
                let name = format!(
                    "{}/{}",
                    batch.collection.split_once('/').map_or(batch.collection, |(_, c)| c),
                    version.table
                );
                let schema = evolve(&name, current.as_ref(), &version.schema)?;
                tx.execute(
                    "INSERT INTO table_versions (table_id, version, rows, files, execution_id, created_at_ms, schema, txns)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    args![
                        table_id,
                        next,
                        version.rows as i64,
                        serde_json::to_string(&version.files).expect("json"),
                        execution_id,
                        now_ms(),
                        schema.map(|s| s.to_string()),
                        serde_json::to_string(&version.txns).expect("json")
                    ],
                )?;
                if version_number.is_none() {
                    tx.execute("UPDATE executions SET table_version = ?1 WHERE id = ?2", args![next, execution_id])?;
                }
                if let Some(iceberg) = &version.iceberg {
                    if iceberg.version != next {
                        return Err(CatalogError::IcebergMoved { table: version.table.clone() });
                    }
                    iceberg::move_pointer(tx, table_id, iceberg)?;
                    // The metadata file names the execution: written now, under the table's lock.
                    iceberg.write(&self.store, Some(execution_id)).map_err(CatalogError::Store)?;
                    crate::crash::point("after-iceberg-metadata");
                }
                version_number = version_number.or(Some(next));
            }
            for dead in batch.dead_letters {
                let m = &dead.message;
                tx.execute(
                    "INSERT INTO dead_letters (collection, publisher, topic, partition, \"offset\", timestamp_ms, key, value,
                                               headers, error, execution_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    args![
                        batch.collection, batch.publisher, batch.topic, m.partition, m.offset, m.timestamp, m.key(),
                        m.payload(), serde_json::to_string(&m.headers).expect("json"), &dead.error, execution_id
                    ],
                )?;
            }
            Ok((execution_id, version_number))
        })
    }

    /// Commits a version that replaces `removed` (live files of the table) by
    /// `added`, holding the same rows: a compaction. Refused if one of them is
    /// no longer live (another compaction took it first).
    pub fn commit_compaction(
        &self,
        collection: &str,
        table: &str,
        added: &[DataFile],
        removed: &[DataFile],
    ) -> Result<i64, CatalogError> {
        self.db.transaction(|tx| {
            let table_id = lock_table(tx, collection, table)?;
            let mut gone = std::collections::HashSet::new();
            for row in
                tx.query("SELECT removed FROM table_versions WHERE table_id = ?1 AND removed != '[]'", args![table_id])?
            {
                let files: Vec<DataFile> = serde_json::from_str(&row.get::<String>(0)?).unwrap_or_default();
                gone.extend(files.into_iter().map(|f| f.path));
            }
            if let Some(file) = removed.iter().find(|f| gone.contains(&f.path)) {
                return Err(CatalogError::Exists(format!("a compaction of {}", file.path)));
            }
            let next: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) + 1 FROM table_versions WHERE table_id = ?1",
                    args![table_id],
                )?
                .get(0)?;
            tx.execute(
                "INSERT INTO table_versions (table_id, version, rows, files, execution_id, created_at_ms, removed)
                 VALUES (?1, ?2, 0, ?3, NULL, ?4, ?5)",
                args![
                    table_id,
                    next,
                    serde_json::to_string(added).expect("json"),
                    now_ms(),
                    serde_json::to_string(removed).expect("json")
                ],
            )?;
            Ok(next)
        })
    }

    /// A table's identity, giving it a Delta id if it has none yet (a table
    /// committed before weir wrote Delta logs). `None`: no such table.
    pub fn table_record(&self, collection: &str, table: &str) -> Result<Option<TableRecord>, CatalogError> {
        self.db.run(|sql| {
            type Row = (Option<String>, i64, Vec<String>);
            let read = |sql: &mut dyn Sql| -> Result<Option<Row>, CatalogError> {
                sql.query_opt(
                    "SELECT delta_id, created_at_ms, partition_by FROM tables WHERE collection = ?1 AND name = ?2",
                    args![collection, table],
                )?
                .map(|r| {
                    let partition_by: Option<String> = r.get(2)?;
                    let partition_by = partition_by.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
                    Ok((r.get(0)?, r.get::<Option<i64>>(1)?.unwrap_or(0), partition_by))
                })
                .transpose()
            };
            let record = match read(sql)? {
                None => return Ok(None),
                Some((Some(delta_id), created_at_ms, partition_by)) => {
                    TableRecord { delta_id, created_at_ms, partition_by }
                }
                Some((None, _, _)) => {
                    sql.execute(
                        "UPDATE tables SET delta_id = ?3 WHERE collection = ?1 AND name = ?2 AND delta_id IS NULL",
                        args![collection, table, new_uuid()],
                    )?;
                    let (delta_id, created_at_ms, partition_by) = read(sql)?.expect("the table is there");
                    TableRecord { delta_id: delta_id.expect("just given"), created_at_ms, partition_by }
                }
            };
            Ok(Some(record))
        })
    }

    /// Every table of every collection, as (collection key, table name).
    pub fn all_tables(&self) -> Result<Vec<(String, String)>, CatalogError> {
        let rows =
            self.db.run(|sql| sql.query("SELECT collection, name FROM tables ORDER BY collection, name", &[]))?;
        rows.iter().map(|r| Ok((r.get(0)?, r.get(1)?))).collect()
    }

    /// The tables of a collection key.
    pub fn tables(&self, collection: &str) -> Result<Vec<TableSummary>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                "SELECT t.name, COUNT(v.version), MAX(v.version), CAST(COALESCE(SUM(v.rows - v.removed_rows), 0) AS BIGINT),
                        MAX(v.created_at_ms)
                 FROM tables t LEFT JOIN table_versions v ON v.table_id = t.id WHERE t.collection = ?1
                 GROUP BY t.id, t.name ORDER BY t.name",
                args![collection],
            )
        })?;
        rows.iter()
            .map(|r| {
                Ok(TableSummary {
                    name: r.get(0)?,
                    versions: r.get(1)?,
                    latest_version: r.get(2)?,
                    rows: r.get(3)?,
                    updated_at_ms: r.get(4)?,
                })
            })
            .collect()
    }
}

/// Moves a partition's offset past a batch's range, only if it is still
/// where the batch started: the compare-and-set, as one conditional write
/// (read committed in PostgreSQL re-checks a row another transaction just
/// changed, and waits for a row another is inserting), then a read to say
/// why when it did not apply.
fn advance(tx: &mut dyn Sql, batch: &BatchCommit<'_>, range: &PartitionRange) -> Result<(), CatalogError> {
    let (publisher, topic, partition, next) = (batch.publisher, batch.topic, range.partition, range.last + 1);
    let moved = move_offset(tx, publisher, topic, partition, range.expected, next)?;
    let found = match moved {
        Ok(()) => range.expected,
        Err(found) => found,
    };
    if let Some(next) = found.filter(|next| range.first < *next) {
        return Err(CatalogError::OverlapsCommitted { topic: topic.to_string(), partition, first: range.first, next });
    }
    if moved.is_err() {
        return Err(CatalogError::ConflictingOffsets {
            topic: topic.to_string(),
            partition,
            expected: range.expected,
            found,
        });
    }
    Ok(())
}

/// Moves a partition's next offset from `expected` (`None`: none stored) to
/// `next`, compare-and-set; when it was not `expected`, the offset found.
fn move_offset(
    tx: &mut dyn Sql,
    publisher: &str,
    topic: &str,
    partition: i32,
    expected: Option<i64>,
    next: i64,
) -> Result<Result<(), Option<i64>>, CatalogError> {
    let moved = match expected {
        None => tx.execute(
            "INSERT INTO source_offsets (publisher, topic, partition, next_offset) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (publisher, topic, partition) DO NOTHING",
            args![publisher, topic, partition, next],
        )?,
        Some(expected) => tx.execute(
            "UPDATE source_offsets SET next_offset = ?4
             WHERE publisher = ?1 AND topic = ?2 AND partition = ?3 AND next_offset = ?5",
            args![publisher, topic, partition, next, expected],
        )?,
    };
    if moved == 1 {
        return Ok(Ok(()));
    }
    let found = tx
        .query_opt(
            "SELECT next_offset FROM source_offsets WHERE publisher = ?1 AND topic = ?2 AND partition = ?3",
            args![publisher, topic, partition],
        )?
        .map(|r| r.get(0))
        .transpose()?;
    Ok(Err(found))
}

/// A version's files: objects, or (committed before they were) plain paths,
/// whose size the Delta log's writer finds on disk.
pub(super) fn parse_files(text: &str, rows: u64) -> Vec<DataFile> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Stored {
        File(DataFile),
        Path(String),
    }
    let stored: Vec<Stored> = serde_json::from_str(text).unwrap_or_default();
    let single = stored.len() == 1;
    stored
        .into_iter()
        .map(|s| match s {
            Stored::File(file) => file,
            Stored::Path(path) => DataFile { path, rows: if single { rows } else { 0 }, ..DataFile::default() },
        })
        .collect()
}

/// A random (version 4) UUID.
pub fn new_uuid() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the system's random source works");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}
