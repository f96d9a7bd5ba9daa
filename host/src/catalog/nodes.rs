//! What the nodes of a cluster share besides the control plane: each node's
//! heartbeat with what it runs (`weir publisher status` lists them), and the
//! catalog's settings (the admin token's hash, kept once for every node).

use serde::Serialize;

use super::db::{Migration, args};
use super::{Catalog, CatalogError};

/// A node of the cluster as its last heartbeat left it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRecord {
    pub id: String,
    /// Where its API listens.
    pub address: String,
    pub started_at_ms: i64,
    pub heartbeat_ms: i64,
    /// What it runs: publisher key → its worker's state there (JSON).
    pub holdings: serde_json::Value,
}

pub(super) const NODES_MIGRATION: Migration = Migration {
    sqlite: "CREATE TABLE nodes (
            id TEXT PRIMARY KEY,
            address TEXT NOT NULL,
            started_at_ms INTEGER NOT NULL,
            heartbeat_ms INTEGER NOT NULL,
            holdings TEXT NOT NULL
        );",
    postgres: "CREATE TABLE nodes (
            id TEXT PRIMARY KEY,
            address TEXT NOT NULL,
            started_at_ms BIGINT NOT NULL,
            heartbeat_ms BIGINT NOT NULL,
            holdings TEXT NOT NULL
        );",
};

impl Catalog {
    pub fn setting(&self, key: &str) -> Result<Option<String>, CatalogError> {
        self.db
            .run(|sql| sql.query_opt("SELECT value FROM settings WHERE key = ?1", args![key]))?
            .map(|r| r.get(0))
            .transpose()
    }

    /// Stores a setting unless it is there already; false: it was.
    pub fn add_setting(&self, key: &str, value: &str) -> Result<bool, CatalogError> {
        let added = self.db.run(|sql| {
            sql.execute(
                "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                args![key, value],
            )
        })?;
        Ok(added == 1)
    }

    /// Records a node's heartbeat and what it runs.
    pub fn heartbeat(&self, node: &NodeRecord) -> Result<(), CatalogError> {
        self.db.run(|sql| {
            sql.execute(
                "INSERT INTO nodes (id, address, started_at_ms, heartbeat_ms, holdings) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET address = excluded.address, started_at_ms = excluded.started_at_ms,
                    heartbeat_ms = excluded.heartbeat_ms, holdings = excluded.holdings",
                args![&node.id, &node.address, node.started_at_ms, node.heartbeat_ms, node.holdings.to_string()],
            )
        })?;
        Ok(())
    }

    /// Every node that sent a heartbeat since `since_ms`, by id.
    pub fn nodes(&self, since_ms: i64) -> Result<Vec<NodeRecord>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                "SELECT id, address, started_at_ms, heartbeat_ms, holdings FROM nodes WHERE heartbeat_ms >= ?1 ORDER BY id",
                args![since_ms],
            )
        })?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    id: r.get(0)?,
                    address: r.get(1)?,
                    started_at_ms: r.get(2)?,
                    heartbeat_ms: r.get(3)?,
                    holdings: serde_json::from_str(&r.get::<String>(4)?).unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Forgets a node (it stopped cleanly).
    pub fn remove_node(&self, id: &str) -> Result<(), CatalogError> {
        self.db.run(|sql| sql.execute("DELETE FROM nodes WHERE id = ?1", args![id]))?;
        Ok(())
    }
}
