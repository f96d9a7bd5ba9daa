//! The catalog database as an Iceberg SQL catalog: the tables pyiceberg's
//! `SqlCatalog` and Iceberg's JDBC catalog keep (`iceberg_tables`, whose
//! `metadata_location` is each table's current metadata file, and
//! `iceberg_namespace_properties`). weir moves a table's pointer in the
//! transaction that commits the version its new metadata holds, as a
//! compare-and-set on the location it was made from: a reader of the catalog
//! never sees a snapshot the catalog did not commit, and of two writers the
//! second fails and makes its metadata again.

use super::db::{Migration, Sql, args};
use super::{Catalog, CatalogError};

/// The catalog name weir's tables are under (the SQL catalog's `catalog_name`).
pub const CATALOG_NAME: &str = "weir";

/// 10: the Iceberg SQL catalog's tables, as pyiceberg creates them; and each
/// version's manifests (JSON), which the next version's manifest list names again.
pub const ICEBERG_MIGRATION: Migration = Migration { sqlite: ICEBERG_TABLES, postgres: ICEBERG_TABLES };

const ICEBERG_TABLES: &str = "CREATE TABLE iceberg_tables (
        catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000),
        previous_metadata_location VARCHAR(1000),
        PRIMARY KEY (catalog_name, table_namespace, table_name));
    CREATE TABLE iceberg_namespace_properties (
        catalog_name VARCHAR(255) NOT NULL, namespace VARCHAR(255) NOT NULL,
        property_key VARCHAR(255) NOT NULL, property_value VARCHAR(1000) NOT NULL,
        PRIMARY KEY (catalog_name, namespace, property_key));
    ALTER TABLE table_versions ADD COLUMN iceberg TEXT;";

/// A table's Iceberg metadata, made for `version`, to become current when
/// that version commits (`tables::iceberg::prepare`).
#[derive(Debug, Clone)]
pub struct IcebergCommit {
    pub namespace: String,
    pub name: String,
    /// The metadata file it was made from: the pointer moves only from there.
    pub expected: Option<String>,
    /// Its metadata file: its key in the store, its location as readers open it, and what it holds.
    pub key: String,
    pub location: String,
    pub metadata: serde_json::Value,
    /// The metadata as written, serialized before the transaction; a new
    /// version's summary names its execution [`PENDING_EXECUTION`] until then.
    pub text: String,
    /// The other files it names (its manifest and manifest list), written with it.
    pub files: Vec<(String, bytes::Bytes)>,
    pub version: i64,
    /// The version's manifests (JSON), kept with it (`None`: it keeps those it has).
    pub manifests: Option<String>,
}

impl IcebergCommit {
    /// Writes its files and the metadata file, all at once (their syncs or
    /// requests overlap); a new version's metadata with the id of the
    /// execution that commits it in its snapshot's summary (`weir.execution`),
    /// which is known only inside that transaction.
    pub fn write(&self, store: &crate::store::Store, execution: Option<i64>) -> anyhow::Result<()> {
        let pending = format!("\"weir.execution\":\"{PENDING_EXECUTION}\"");
        let text = match execution {
            Some(id) => self.text.replacen(&pending, &format!("\"weir.execution\":\"{id}\""), 1),
            None => self.text.clone(),
        };
        let mut files = self.files.clone();
        files.push((self.key.clone(), text.into()));
        store.put_all(files)
    }

    /// Its metadata as [`write`](Self::write) wrote it.
    pub fn into_written(mut self, execution: Option<i64>) -> serde_json::Value {
        if let Some(id) = execution {
            let snapshots = self.metadata["snapshots"].as_array_mut().into_iter().flatten();
            for snapshot in snapshots.filter(|s| s["summary"]["weir.execution"] == PENDING_EXECUTION) {
                snapshot["summary"]["weir.execution"] = id.to_string().into();
            }
        }
        self.metadata
    }

    /// The keys of the files it writes.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|(k, _)| k.as_str()).chain([self.key.as_str()])
    }
}

/// A new snapshot's `weir.execution` until its transaction gives the execution an id.
pub const PENDING_EXECUTION: &str = "pending";

/// The Iceberg namespace of a collection (`tenant/collection` → `tenant.collection`).
pub fn namespace(collection: &str) -> String {
    collection.replace('/', ".")
}

impl Catalog {
    /// Where the table's current Iceberg metadata is (`None`: it has none).
    pub fn iceberg_location(&self, namespace: &str, name: &str) -> Result<Option<String>, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_opt(
                "SELECT metadata_location FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                args![CATALOG_NAME, namespace, name],
            )
        })?;
        Ok(row.map(|r| r.get::<Option<String>>(0)).transpose()?.flatten())
    }

    /// The table's latest version (0: none).
    pub fn latest_version(&self, collection: &str, table: &str) -> Result<i64, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_one(
                "SELECT COALESCE(MAX(v.version), 0) FROM table_versions v JOIN tables t ON t.id = v.table_id
                 WHERE t.collection = ?1 AND t.name = ?2",
                args![collection, table],
            )
        })?;
        row.get(0)
    }

    /// The manifests (JSON) versions up to `version` kept, newest first (at most `limit` versions').
    pub fn iceberg_manifests(
        &self,
        collection: &str,
        table: &str,
        version: i64,
        limit: Option<usize>,
    ) -> Result<Vec<(i64, String)>, CatalogError> {
        let limit = limit.map_or(String::new(), |n| format!(" LIMIT {n}"));
        let rows = self.db.run(|sql| {
            sql.query(
                &format!(
                    "SELECT v.version, v.iceberg FROM table_versions v JOIN tables t ON t.id = v.table_id
                     WHERE t.collection = ?1 AND t.name = ?2 AND v.version <= ?3 AND v.iceberg IS NOT NULL
                     ORDER BY v.version DESC{limit}"
                ),
                args![collection, table, version],
            )
        })?;
        rows.iter().map(|r| Ok((r.get(0)?, r.get(1)?))).collect()
    }

    /// Moves the table's pointer to `commit`, which holds a version already
    /// committed (a catch-up, not a new version).
    pub fn move_iceberg(&self, collection: &str, table: &str, commit: &IcebergCommit) -> Result<(), CatalogError> {
        self.db.transaction(|tx| {
            let table_id: i64 = tx
                .query_one("SELECT id FROM tables WHERE collection = ?1 AND name = ?2", args![collection, table])?
                .get(0)?;
            move_pointer(tx, table_id, commit)
        })
    }
}

/// Moves the pointer to `commit`'s metadata if it is still where that was
/// made from, and keeps the version's manifests; else [`CatalogError::IcebergMoved`].
pub(super) fn move_pointer(tx: &mut dyn Sql, table_id: i64, commit: &IcebergCommit) -> Result<(), CatalogError> {
    let (namespace, name) = (&commit.namespace, &commit.name);
    let moved = match &commit.expected {
        None => tx.execute(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location)
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (catalog_name, table_namespace, table_name) DO NOTHING",
            args![CATALOG_NAME, namespace, name, &commit.location],
        )?,
        Some(expected) => tx.execute(
            "UPDATE iceberg_tables SET metadata_location = ?4, previous_metadata_location = ?5
             WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3 AND metadata_location = ?5",
            args![CATALOG_NAME, namespace, name, &commit.location, expected],
        )?,
    };
    if moved != 1 {
        return Err(CatalogError::IcebergMoved { table: format!("{}.{}", commit.namespace, commit.name) });
    }
    tx.execute(
        "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
         VALUES (?1, ?2, 'exists', 'true') ON CONFLICT (catalog_name, namespace, property_key) DO NOTHING",
        args![CATALOG_NAME, &commit.namespace],
    )?;
    if let Some(manifests) = &commit.manifests {
        tx.execute(
            "UPDATE table_versions SET iceberg = ?3 WHERE table_id = ?1 AND version = ?2",
            args![table_id, commit.version, manifests],
        )?;
    }
    Ok(())
}
