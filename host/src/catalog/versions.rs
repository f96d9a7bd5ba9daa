//! A table's committed versions, and where its Delta log holds each: the
//! catalog commits a version first, and the log's writer notes afterwards
//! which Delta version took it (see `tables::delta`).

use super::db::{Value, args};
use super::{Catalog, CatalogError, TableVersion, parse_files};

impl Catalog {
    pub fn versions(&self, collection: &str, table: &str) -> Result<Vec<TableVersion>, CatalogError> {
        self.versions_after(collection, table, 0)
    }

    /// The versions of a table after `version`, oldest first.
    pub fn versions_after(
        &self,
        collection: &str,
        table: &str,
        version: i64,
    ) -> Result<Vec<TableVersion>, CatalogError> {
        self.query_versions("v.version > ?3", args![collection, table, version])
    }

    /// The versions of a table its Delta log does not hold yet, oldest first.
    pub fn unlogged_versions(&self, collection: &str, table: &str) -> Result<Vec<TableVersion>, CatalogError> {
        self.query_versions("v.delta_version IS NULL", args![collection, table])
    }

    fn query_versions(&self, filter: &str, args: &[Value]) -> Result<Vec<TableVersion>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                &format!(
                    "SELECT v.version, v.rows, v.files, v.execution_id, v.created_at_ms, v.schema, v.txns, v.removed,
                            v.delta_version, v.removed_rows
                     FROM table_versions v JOIN tables t ON t.id = v.table_id
                     WHERE t.collection = ?1 AND t.name = ?2 AND {filter} ORDER BY v.version"
                ),
                args,
            )
        })?;
        rows.iter()
            .map(|r| {
                let rows: u64 = r.get(1)?;
                let (schema, txns): (Option<String>, String) = (r.get(5)?, r.get(6)?);
                Ok(TableVersion {
                    version: r.get(0)?,
                    rows,
                    files: parse_files(&r.get::<String>(2)?, rows),
                    execution: r.get(3)?,
                    created_at_ms: r.get(4)?,
                    schema: schema.and_then(|s| serde_json::from_str(&s).ok()),
                    txns: serde_json::from_str(&txns).unwrap_or_default(),
                    removed: serde_json::from_str(&r.get::<String>(7)?).unwrap_or_default(),
                    delta_version: r.get(8)?,
                    removed_rows: r.get(9)?,
                })
            })
            .collect()
    }

    /// Records that Delta version `delta_version` of the table's log holds `version`.
    pub fn set_delta_version(
        &self,
        collection: &str,
        table: &str,
        version: i64,
        delta_version: i64,
    ) -> Result<(), CatalogError> {
        self.db.run(|sql| {
            sql.execute(
                "UPDATE table_versions SET delta_version = ?4
                 WHERE table_id = (SELECT id FROM tables WHERE collection = ?1 AND name = ?2) AND version = ?3",
                args![collection, table, version, delta_version],
            )
        })?;
        Ok(())
    }

    /// Forgets where versions held by Delta versions after `delta_version` are:
    /// the log ends there (it lost commits to a crash before they were
    /// durable), so they are written again. Returns how many.
    pub fn unlog_after(&self, collection: &str, table: &str, delta_version: i64) -> Result<u64, CatalogError> {
        self.db.run(|sql| {
            sql.execute(
                "UPDATE table_versions SET delta_version = NULL
                 WHERE table_id = (SELECT id FROM tables WHERE collection = ?1 AND name = ?2) AND delta_version > ?3",
                args![collection, table, delta_version],
            )
        })
    }

    /// The table's columns as of its last version before `before` that set
    /// them (`None`: none recorded).
    pub fn table_schema(
        &self,
        collection: &str,
        table: &str,
        before: i64,
    ) -> Result<Option<serde_json::Value>, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_opt(
                "SELECT v.schema FROM table_versions v JOIN tables t ON t.id = v.table_id
                 WHERE t.collection = ?1 AND t.name = ?2 AND v.schema IS NOT NULL AND v.version < ?3
                 ORDER BY v.version DESC LIMIT 1",
                args![collection, table, before],
            )
        })?;
        let text: Option<String> = row.map(|r| r.get(0)).transpose()?;
        Ok(text.and_then(|s| serde_json::from_str(&s).ok()))
    }

    /// Where the table's version `version` is in its Delta log: `None`, no
    /// such version; `Some(None)`, committed but not in the log yet.
    pub fn delta_version_of(
        &self,
        collection: &str,
        table: &str,
        version: i64,
    ) -> Result<Option<Option<i64>>, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_opt(
                "SELECT v.delta_version FROM table_versions v JOIN tables t ON t.id = v.table_id
                 WHERE t.collection = ?1 AND t.name = ?2 AND v.version = ?3",
                args![collection, table, version],
            )
        })?;
        row.map(|r| r.get(0)).transpose()
    }

    /// The table's newest version that Delta version `delta_version` holds
    /// (`None`: none, the log's first versions came before weir's).
    pub fn version_at(&self, collection: &str, table: &str, delta_version: i64) -> Result<Option<i64>, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_one(
                "SELECT MAX(v.version) FROM table_versions v JOIN tables t ON t.id = v.table_id
                 WHERE t.collection = ?1 AND t.name = ?2 AND v.delta_version <= ?3",
                args![collection, table, delta_version],
            )
        })?;
        row.get(0)
    }

    /// Versions the Delta logs do not hold yet, by table: (collection, table, how many).
    pub fn unlogged(&self) -> Result<Vec<(String, String, i64)>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                "SELECT t.collection, t.name, COUNT(*) FROM table_versions v JOIN tables t ON t.id = v.table_id
                 WHERE v.delta_version IS NULL GROUP BY t.collection, t.name ORDER BY t.collection, t.name",
                &[],
            )
        })?;
        rows.iter().map(|r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).collect()
    }
}
