//! The control plane's part of the catalog: tenants and their tokens,
//! collections with their `kafka-topic-in` connection, uploaded plugins and
//! registered publishers.
//!
//! A tenant's stream data (tables, versions, offsets, executions) is kept
//! under the collection key `<tenant>/<collection>` (see [`scope`]): names
//! cannot hold `/`, so two tenants' data never meet.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use super::{Catalog, CatalogError, now_ms, sealed};
use crate::secrets::Keyring;
use crate::source::KafkaConnection;

/// The collection key a tenant's collection has in the stream tables.
pub fn scope(tenant: &str, collection: &str) -> String {
    format!("{tenant}/{collection}")
}

/// What one tenant may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Quotas {
    pub max_publishers: u32,
    /// Linear memory each of its plugins may use per batch.
    pub memory_limit_bytes: u64,
    /// CPU time each of its plugins may use per batch.
    pub deadline_ms: u64,
    /// The largest module it may upload.
    pub max_module_bytes: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Self { max_publishers: 20, memory_limit_bytes: 256 << 20, deadline_ms: 10_000, max_module_bytes: 32 << 20 }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Tenant {
    #[serde(skip)]
    pub id: i64,
    pub name: String,
    pub quotas: Quotas,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone)]
pub struct Collection {
    pub id: i64,
    pub tenant: String,
    pub name: String,
    pub group: String,
    /// The collection's `kafka-topic-in` connection, secrets included: never return it as it is.
    pub connection: Option<KafkaConnection>,
    pub created_at_ms: i64,
}

impl Collection {
    pub fn scope(&self) -> String {
        scope(&self.tenant, &self.name)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PluginModule {
    pub sha256: String,
    pub size: u64,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone)]
pub struct PublisherRecord {
    pub id: i64,
    pub collection: Collection,
    pub name: String,
    /// The declaration as registered (TOML, schema inline).
    pub declaration: String,
    /// The plugin's sha256.
    pub plugin: String,
    pub paused: bool,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl PublisherRecord {
    /// Its key in the stream tables: `<tenant>/<collection>/<name>`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.collection.scope(), self.name)
    }
}

/// A token as it may be shown: everything but the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenInfo {
    /// Public: the first 12 hex digits of the token's sha256.
    pub id: String,
    pub created_at_ms: i64,
    pub last_used_ms: Option<i64>,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

impl TokenInfo {
    pub fn usable(&self, now_ms: i64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms.is_none_or(|at| now_ms < at)
    }
}

fn token_id(sha256: &str) -> String {
    sha256.chars().take(12).collect()
}

fn token_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<TokenInfo> {
    Ok(TokenInfo {
        id: r.get(at)?,
        created_at_ms: r.get(at + 1)?,
        last_used_ms: r.get(at + 2)?,
        expires_at_ms: r.get(at + 3)?,
        revoked_at_ms: r.get(at + 4)?,
    })
}

pub(super) const TOKENS_MIGRATION: &str = "
    ALTER TABLE tokens ADD COLUMN id TEXT;
    UPDATE tokens SET id = substr(sha256, 1, 12);
    ALTER TABLE tokens ADD COLUMN last_used_ms INTEGER;
    ALTER TABLE tokens ADD COLUMN expires_at_ms INTEGER;
    ALTER TABLE tokens ADD COLUMN revoked_at_ms INTEGER;
    CREATE INDEX tokens_by_tenant ON tokens (tenant_id, id);
";

pub(super) const MIGRATION: &str = "
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE tenants (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        quotas TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    );
    CREATE TABLE tokens (
        sha256 TEXT PRIMARY KEY,
        tenant_id INTEGER NOT NULL REFERENCES tenants(id),
        created_at_ms INTEGER NOT NULL
    );
    CREATE TABLE collections (
        id INTEGER PRIMARY KEY,
        tenant_id INTEGER NOT NULL REFERENCES tenants(id),
        name TEXT NOT NULL,
        grp TEXT NOT NULL,
        connection TEXT,
        created_at_ms INTEGER NOT NULL,
        UNIQUE (tenant_id, name)
    );
    CREATE TABLE plugins (
        tenant_id INTEGER NOT NULL REFERENCES tenants(id),
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, sha256)
    );
    CREATE TABLE publishers (
        id INTEGER PRIMARY KEY,
        collection_id INTEGER NOT NULL REFERENCES collections(id),
        name TEXT NOT NULL,
        declaration TEXT NOT NULL,
        plugin_sha256 TEXT NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        UNIQUE (collection_id, name)
    );";

const COLLECTION_COLUMNS: &str = "c.id, t.name, c.name, c.grp, c.connection, c.created_at_ms";
const PUBLISHER_COLUMNS: &str = "c.id, t.name, c.name, c.grp, c.connection, c.created_at_ms, p.id, p.name, p.declaration, p.plugin_sha256, p.paused, p.created_at_ms, p.updated_at_ms";

fn tenant_row(r: &Row<'_>) -> rusqlite::Result<Tenant> {
    let quotas: String = r.get(2)?;
    Ok(Tenant {
        id: r.get(0)?,
        name: r.get(1)?,
        quotas: serde_json::from_str(&quotas).unwrap_or_default(),
        created_at_ms: r.get(3)?,
    })
}

fn collection_row(r: &Row<'_>, keyring: &Keyring) -> rusqlite::Result<Collection> {
    Ok(Collection {
        id: r.get(0)?,
        tenant: r.get(1)?,
        name: r.get(2)?,
        group: r.get(3)?,
        connection: sealed::unseal(keyring, r, 1, 4)?,
        created_at_ms: r.get(5)?,
    })
}

fn plugin_row(r: &Row<'_>) -> rusqlite::Result<PluginModule> {
    Ok(PluginModule { sha256: r.get(0)?, size: r.get::<_, i64>(1)? as u64, created_at_ms: r.get(2)? })
}

fn publisher_row(r: &Row<'_>, keyring: &Keyring) -> rusqlite::Result<PublisherRecord> {
    Ok(PublisherRecord {
        collection: collection_row(r, keyring)?,
        id: r.get(6)?,
        name: r.get(7)?,
        declaration: r.get(8)?,
        plugin: r.get(9)?,
        paused: r.get(10)?,
        created_at_ms: r.get(11)?,
        updated_at_ms: r.get(12)?,
    })
}

/// Turns a uniqueness violation into [`CatalogError::Exists`].
fn unique(what: impl FnOnce() -> String) -> impl FnOnce(rusqlite::Error) -> CatalogError {
    move |e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => CatalogError::Exists(what()),
        _ => CatalogError::Sql(e),
    }
}

impl Catalog {
    pub fn setting(&self, key: &str) -> Result<Option<String>, CatalogError> {
        Ok(self.conn().query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| r.get(0)).optional()?)
    }

    pub fn set_setting(&self, key: &str, value: &str) -> Result<(), CatalogError> {
        self.conn().execute(
            "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )?;
        Ok(())
    }

    // Tenants and tokens.

    pub fn create_tenant(&self, name: &str, quotas: &Quotas) -> Result<Tenant, CatalogError> {
        let conn = self.conn();
        let created_at_ms = now_ms();
        conn.execute(
            "INSERT INTO tenants (name, quotas, created_at_ms) VALUES (?1, ?2, ?3)",
            params![name, serde_json::to_string(quotas).expect("json"), created_at_ms],
        )
        .map_err(unique(|| format!("tenant `{name}`")))?;
        Ok(Tenant { id: conn.last_insert_rowid(), name: name.into(), quotas: *quotas, created_at_ms })
    }

    pub fn tenants(&self) -> Result<Vec<Tenant>, CatalogError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached("SELECT id, name, quotas, created_at_ms FROM tenants ORDER BY name")?;
        let rows = stmt.query_map([], tenant_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn tenant(&self, name: &str) -> Result<Option<Tenant>, CatalogError> {
        let conn = self.conn();
        Ok(conn
            .query_row("SELECT id, name, quotas, created_at_ms FROM tenants WHERE name = ?1", [name], tenant_row)
            .optional()?)
    }

    /// Stores a token by its sha256 (the token itself is never kept), valid
    /// until `expires_at_ms` if given; returns the token's public id.
    pub fn add_token(
        &self,
        tenant_id: i64,
        sha256: &str,
        expires_at_ms: Option<i64>,
    ) -> Result<TokenInfo, CatalogError> {
        let info = TokenInfo {
            id: token_id(sha256),
            created_at_ms: now_ms(),
            last_used_ms: None,
            expires_at_ms,
            revoked_at_ms: None,
        };
        self.conn().execute(
            "INSERT INTO tokens (sha256, tenant_id, created_at_ms, id, expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![sha256, tenant_id, info.created_at_ms, info.id, expires_at_ms],
        )?;
        Ok(info)
    }

    /// The tenant a token acts for, and the token's state (revoked, expired);
    /// `None`: no such token. A use is recorded (at most once a minute a token).
    pub fn tenant_by_token(&self, sha256: &str) -> Result<Option<(Tenant, TokenInfo)>, CatalogError> {
        let conn = self.conn();
        let found = conn
            .query_row(
                "SELECT t.id, t.name, t.quotas, t.created_at_ms, k.id, k.created_at_ms, k.last_used_ms, k.expires_at_ms,
                        k.revoked_at_ms
                 FROM tokens k JOIN tenants t ON t.id = k.tenant_id WHERE k.sha256 = ?1",
                [sha256],
                |r| Ok((tenant_row(r)?, token_row(r, 4)?)),
            )
            .optional()?;
        if let Some((_, token)) = &found {
            let now = now_ms();
            if token.usable(now) && token.last_used_ms.is_none_or(|t| now - t >= 60_000) {
                conn.execute("UPDATE tokens SET last_used_ms = ?2 WHERE sha256 = ?1", params![sha256, now])?;
            }
        }
        Ok(found)
    }

    /// A tenant's tokens, oldest first (never the tokens themselves).
    pub fn tokens(&self, tenant_id: i64) -> Result<Vec<TokenInfo>, CatalogError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, created_at_ms, last_used_ms, expires_at_ms, revoked_at_ms FROM tokens
             WHERE tenant_id = ?1 ORDER BY created_at_ms, id",
        )?;
        let rows = stmt.query_map([tenant_id], |r| token_row(r, 0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Revokes a tenant's token by its id; `false`: the tenant has no such token.
    pub fn revoke_token(&self, tenant_id: i64, id: &str) -> Result<bool, CatalogError> {
        let changed = self.conn().execute(
            "UPDATE tokens SET revoked_at_ms = COALESCE(revoked_at_ms, ?3) WHERE tenant_id = ?1 AND id = ?2",
            params![tenant_id, id, now_ms()],
        )?;
        Ok(changed > 0)
    }

    // Collections and their connection.

    pub fn create_collection(
        &self,
        tenant: &Tenant,
        name: &str,
        group: &str,
        connection: Option<&KafkaConnection>,
    ) -> Result<Collection, CatalogError> {
        let conn = self.conn();
        let created_at_ms = now_ms();
        conn.execute(
            "INSERT INTO collections (tenant_id, name, grp, connection, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                tenant.id,
                name,
                group,
                sealed::seal(&self.keyring(), &tenant.name, name, connection),
                created_at_ms
            ],
        )
        .map_err(unique(|| format!("collection `{name}`")))?;
        Ok(Collection {
            id: conn.last_insert_rowid(),
            tenant: tenant.name.clone(),
            name: name.into(),
            group: group.into(),
            connection: connection.cloned(),
            created_at_ms,
        })
    }

    pub fn collections(&self, tenant: &Tenant) -> Result<Vec<Collection>, CatalogError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLLECTION_COLUMNS} FROM collections c JOIN tenants t ON t.id = c.tenant_id
             WHERE c.tenant_id = ?1 ORDER BY c.name"
        ))?;
        let keyring = self.keyring();
        let rows = stmt.query_map([tenant.id], |r| collection_row(r, &keyring))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn collection(&self, tenant: &Tenant, name: &str) -> Result<Option<Collection>, CatalogError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                &format!(
                    "SELECT {COLLECTION_COLUMNS} FROM collections c JOIN tenants t ON t.id = c.tenant_id
                     WHERE c.tenant_id = ?1 AND c.name = ?2"
                ),
                params![tenant.id, name],
                |r| collection_row(r, &self.keyring()),
            )
            .optional()?)
    }

    pub fn set_connection(&self, collection: &Collection, connection: &KafkaConnection) -> Result<(), CatalogError> {
        self.conn().execute(
            "UPDATE collections SET connection = ?1 WHERE id = ?2",
            params![
                sealed::seal(&self.keyring(), &collection.tenant, &collection.name, Some(connection)),
                collection.id
            ],
        )?;
        Ok(())
    }

    /// Deletes a collection that has no publishers left, and everything its
    /// publishers committed: tables, versions, offsets, executions, dead letters.
    /// Returns false when publishers remain.
    pub fn delete_collection(&self, collection: &Collection) -> Result<bool, CatalogError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let publishers: i64 =
            tx.query_row("SELECT COUNT(*) FROM publishers WHERE collection_id = ?1", [collection.id], |r| r.get(0))?;
        if publishers > 0 {
            return Ok(false);
        }
        let scope = collection.scope();
        let prefix = format!("{scope}/");
        delete_scope(&tx, &scope, &prefix)?;
        tx.execute("DELETE FROM collections WHERE id = ?1", [collection.id])?;
        tx.commit()?;
        Ok(true)
    }

    // Plugins.

    /// Records that a tenant uploaded a module; false when it already had.
    pub fn add_plugin(&self, tenant: &Tenant, sha256: &str, size: u64) -> Result<bool, CatalogError> {
        let added = self.conn().execute(
            "INSERT OR IGNORE INTO plugins (tenant_id, sha256, size, created_at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![tenant.id, sha256, size as i64, now_ms()],
        )?;
        Ok(added == 1)
    }

    pub fn plugins(&self, tenant: &Tenant) -> Result<Vec<PluginModule>, CatalogError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT sha256, size, created_at_ms FROM plugins WHERE tenant_id = ?1 ORDER BY created_at_ms, sha256",
        )?;
        let rows = stmt.query_map([tenant.id], plugin_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn plugin(&self, tenant: &Tenant, sha256: &str) -> Result<Option<PluginModule>, CatalogError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT sha256, size, created_at_ms FROM plugins WHERE tenant_id = ?1 AND sha256 = ?2",
                params![tenant.id, sha256],
                plugin_row,
            )
            .optional()?)
    }

    // Publishers.

    /// Registers a publisher, or replaces one of that name when `update` is set.
    pub fn put_publisher(
        &self,
        collection: &Collection,
        name: &str,
        declaration: &str,
        plugin: &str,
        update: bool,
    ) -> Result<(), CatalogError> {
        let conn = self.conn();
        let now = now_ms();
        if update {
            conn.execute(
                "INSERT INTO publishers (collection_id, name, declaration, plugin_sha256, created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT (collection_id, name) DO UPDATE SET declaration = excluded.declaration,
                    plugin_sha256 = excluded.plugin_sha256, updated_at_ms = excluded.updated_at_ms",
                params![collection.id, name, declaration, plugin, now],
            )?;
        } else {
            conn.execute(
                "INSERT INTO publishers (collection_id, name, declaration, plugin_sha256, created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![collection.id, name, declaration, plugin, now],
            )
            .map_err(unique(|| format!("publisher `{}/{name}`", collection.name)))?;
        }
        Ok(())
    }

    fn query_publishers(
        &self,
        filter: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<PublisherRecord>, CatalogError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {PUBLISHER_COLUMNS} FROM publishers p JOIN collections c ON c.id = p.collection_id
             JOIN tenants t ON t.id = c.tenant_id WHERE {filter} ORDER BY t.name, c.name, p.name"
        ))?;
        let keyring = self.keyring();
        let rows = stmt.query_map(args, |r| publisher_row(r, &keyring))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every registered publisher of every tenant (what `weir serve` starts on boot).
    pub fn all_publishers(&self) -> Result<Vec<PublisherRecord>, CatalogError> {
        self.query_publishers("1 = 1", [])
    }

    pub fn tenant_publishers(&self, tenant: &Tenant) -> Result<Vec<PublisherRecord>, CatalogError> {
        self.query_publishers("t.id = ?1", [tenant.id])
    }

    pub fn publishers(&self, collection: &Collection) -> Result<Vec<PublisherRecord>, CatalogError> {
        self.query_publishers("c.id = ?1", [collection.id])
    }

    pub fn publisher(&self, collection: &Collection, name: &str) -> Result<Option<PublisherRecord>, CatalogError> {
        Ok(self.query_publishers("c.id = ?1 AND p.name = ?2", params![collection.id, name])?.pop())
    }

    pub fn set_paused(&self, publisher: &PublisherRecord, paused: bool) -> Result<(), CatalogError> {
        self.conn().execute(
            "UPDATE publishers SET paused = ?1, updated_at_ms = ?2 WHERE id = ?3",
            params![paused, now_ms(), publisher.id],
        )?;
        Ok(())
    }

    /// Deletes a publisher. Its table, versions and offsets stay: registering
    /// it again resumes where it stopped, without re-reading the topic.
    pub fn delete_publisher(&self, publisher: &PublisherRecord) -> Result<(), CatalogError> {
        self.conn().execute("DELETE FROM publishers WHERE id = ?1", [publisher.id])?;
        Ok(())
    }
}

fn delete_scope(tx: &Connection, scope: &str, prefix: &str) -> Result<(), CatalogError> {
    let starts = "substr(publisher, 1, length(?1)) = ?1";
    tx.execute("DELETE FROM table_versions WHERE table_id IN (SELECT id FROM tables WHERE collection = ?1)", [scope])?;
    tx.execute("DELETE FROM tables WHERE collection = ?1", [scope])?;
    tx.execute(&format!("DELETE FROM source_offsets WHERE {starts}"), [prefix])?;
    tx.execute(&format!("DELETE FROM executions WHERE {starts}"), [prefix])?;
    tx.execute("DELETE FROM dead_letters WHERE collection = ?1", [scope])?;
    Ok(())
}
