//! The control plane's part of the catalog: tenants and their tokens,
//! collections with their `kafka-topic-in` connection, and registered
//! publishers (uploaded plugins are in `plugins.rs`).
//!
//! A tenant's stream data (tables, versions, offsets, executions) is kept
//! under the collection key `<tenant>/<collection>` (see [`scope`]): names
//! cannot hold `/`, so two tenants' data never meet.

use serde::{Deserialize, Serialize};

use super::db::{Migration, Row, Sql, Value, args};
use super::{Catalog, CatalogError, now_ms, sealed};
use crate::publisher::source::KafkaConnection;
use crate::secrets::Keyring;
use crate::tables::TableFormat;

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
    /// The format of its publishers' tables when their declaration names none (`None`: Delta).
    pub table_format: Option<TableFormat>,
}

impl Collection {
    pub fn scope(&self) -> String {
        scope(&self.tenant, &self.name)
    }

    /// The format of a publisher's table that declared `declared`.
    pub fn table_format_of(&self, declared: Option<TableFormat>) -> TableFormat {
        declared.or(self.table_format).unwrap_or_default()
    }
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

fn token_row(r: &Row, at: usize) -> Result<TokenInfo, CatalogError> {
    Ok(TokenInfo {
        id: r.get(at)?,
        created_at_ms: r.get(at + 1)?,
        last_used_ms: r.get(at + 2)?,
        expires_at_ms: r.get(at + 3)?,
        revoked_at_ms: r.get(at + 4)?,
    })
}

pub(super) const TOKENS_MIGRATION: Migration = Migration {
    sqlite: "
        ALTER TABLE tokens ADD COLUMN id TEXT;
        UPDATE tokens SET id = substr(sha256, 1, 12);
        ALTER TABLE tokens ADD COLUMN last_used_ms INTEGER;
        ALTER TABLE tokens ADD COLUMN expires_at_ms INTEGER;
        ALTER TABLE tokens ADD COLUMN revoked_at_ms INTEGER;
        CREATE INDEX tokens_by_tenant ON tokens (tenant_id, id);",
    postgres: "
        ALTER TABLE tokens ADD COLUMN id TEXT;
        UPDATE tokens SET id = substr(sha256, 1, 12);
        ALTER TABLE tokens ADD COLUMN last_used_ms BIGINT;
        ALTER TABLE tokens ADD COLUMN expires_at_ms BIGINT;
        ALTER TABLE tokens ADD COLUMN revoked_at_ms BIGINT;
        CREATE INDEX tokens_by_tenant ON tokens (tenant_id, id);",
};

pub(super) const MIGRATION: Migration = Migration {
    sqlite: "
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
        );",
    postgres: "
        CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE tenants (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            quotas TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE tokens (
            sha256 TEXT PRIMARY KEY,
            tenant_id BIGINT NOT NULL REFERENCES tenants(id),
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE collections (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            tenant_id BIGINT NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL,
            grp TEXT NOT NULL,
            connection TEXT,
            created_at_ms BIGINT NOT NULL,
            UNIQUE (tenant_id, name)
        );
        CREATE TABLE plugins (
            tenant_id BIGINT NOT NULL REFERENCES tenants(id),
            sha256 TEXT NOT NULL,
            size BIGINT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            PRIMARY KEY (tenant_id, sha256)
        );
        CREATE TABLE publishers (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            collection_id BIGINT NOT NULL REFERENCES collections(id),
            name TEXT NOT NULL,
            declaration TEXT NOT NULL,
            plugin_sha256 TEXT NOT NULL,
            paused BIGINT NOT NULL DEFAULT 0,
            created_at_ms BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL,
            UNIQUE (collection_id, name)
        );",
};

const COLLECTION_COLUMNS: &str = "c.id, t.name, c.name, c.grp, c.connection, c.created_at_ms, c.table_format";
const PUBLISHER_COLUMNS: &str = "c.id, t.name, c.name, c.grp, c.connection, c.created_at_ms, c.table_format, p.id, p.name, p.declaration, p.plugin_sha256, p.paused, p.created_at_ms, p.updated_at_ms";

fn tenant_row(r: &Row) -> Result<Tenant, CatalogError> {
    let quotas: String = r.get(2)?;
    Ok(Tenant {
        id: r.get(0)?,
        name: r.get(1)?,
        quotas: serde_json::from_str(&quotas).unwrap_or_default(),
        created_at_ms: r.get(3)?,
    })
}

fn collection_row(r: &Row, keyring: &Keyring) -> Result<Collection, CatalogError> {
    Ok(Collection {
        id: r.get(0)?,
        tenant: r.get(1)?,
        name: r.get(2)?,
        group: r.get(3)?,
        connection: sealed::unseal(keyring, r, 1, 4)?,
        created_at_ms: r.get(5)?,
        table_format: r.get::<Option<String>>(6)?.and_then(|f| TableFormat::parse(&f).ok()),
    })
}

fn publisher_row(r: &Row, keyring: &Keyring) -> Result<PublisherRecord, CatalogError> {
    Ok(PublisherRecord {
        collection: collection_row(r, keyring)?,
        id: r.get(7)?,
        name: r.get(8)?,
        declaration: r.get(9)?,
        plugin: r.get(10)?,
        paused: r.get(11)?,
        created_at_ms: r.get(12)?,
        updated_at_ms: r.get(13)?,
    })
}

/// Turns a uniqueness violation into [`CatalogError::Exists`].
fn unique(what: impl FnOnce() -> String) -> impl FnOnce(CatalogError) -> CatalogError {
    move |e| match e {
        CatalogError::Sql { unique_violation: true, .. } => CatalogError::Exists(what()),
        e => e,
    }
}

impl Catalog {
    // Tenants and tokens.

    pub fn create_tenant(&self, name: &str, quotas: &Quotas) -> Result<Tenant, CatalogError> {
        let created_at_ms = now_ms();
        let id: i64 = self
            .db
            .run(|sql| {
                sql.query_one(
                    "INSERT INTO tenants (name, quotas, created_at_ms) VALUES (?1, ?2, ?3) RETURNING id",
                    args![name, serde_json::to_string(quotas).expect("json"), created_at_ms],
                )
            })
            .map_err(unique(|| format!("tenant `{name}`")))?
            .get(0)?;
        Ok(Tenant { id, name: name.into(), quotas: *quotas, created_at_ms })
    }

    /// Changes a tenant's quotas; its publishers' workers restart under them
    /// (their registrations are touched, which every node's reconcile sees).
    pub fn set_quotas(&self, tenant: &Tenant, quotas: &Quotas) -> Result<(), CatalogError> {
        self.db.transaction(|tx| {
            tx.execute(
                "UPDATE tenants SET quotas = ?1 WHERE id = ?2",
                args![serde_json::to_string(quotas).expect("json"), tenant.id],
            )?;
            tx.execute(
                "UPDATE publishers SET updated_at_ms = ?1
                 WHERE collection_id IN (SELECT id FROM collections WHERE tenant_id = ?2)",
                args![now_ms(), tenant.id],
            )?;
            Ok(())
        })
    }

    pub fn tenants(&self) -> Result<Vec<Tenant>, CatalogError> {
        let rows =
            self.db.run(|sql| sql.query("SELECT id, name, quotas, created_at_ms FROM tenants ORDER BY name", &[]))?;
        rows.iter().map(tenant_row).collect()
    }

    pub fn tenant(&self, name: &str) -> Result<Option<Tenant>, CatalogError> {
        self.db
            .run(|sql| {
                sql.query_opt("SELECT id, name, quotas, created_at_ms FROM tenants WHERE name = ?1", args![name])
            })?
            .as_ref()
            .map(tenant_row)
            .transpose()
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
        self.db.run(|sql| {
            sql.execute(
                "INSERT INTO tokens (sha256, tenant_id, created_at_ms, id, expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![sha256, tenant_id, info.created_at_ms, &info.id, expires_at_ms],
            )
        })?;
        Ok(info)
    }

    /// The tenant a token acts for, and the token's state (revoked, expired);
    /// `None`: no such token. A use is recorded (at most once a minute a token).
    pub fn tenant_by_token(&self, sha256: &str) -> Result<Option<(Tenant, TokenInfo)>, CatalogError> {
        self.db.run(|sql| {
            let found = sql
                .query_opt(
                    "SELECT t.id, t.name, t.quotas, t.created_at_ms, k.id, k.created_at_ms, k.last_used_ms,
                            k.expires_at_ms, k.revoked_at_ms
                     FROM tokens k JOIN tenants t ON t.id = k.tenant_id WHERE k.sha256 = ?1",
                    args![sha256],
                )?
                .map(|r| Ok::<_, CatalogError>((tenant_row(&r)?, token_row(&r, 4)?)))
                .transpose()?;
            if let Some((_, token)) = &found {
                let now = now_ms();
                if token.usable(now) && token.last_used_ms.is_none_or(|t| now - t >= 60_000) {
                    sql.execute("UPDATE tokens SET last_used_ms = ?2 WHERE sha256 = ?1", args![sha256, now])?;
                }
            }
            Ok(found)
        })
    }

    /// A tenant's tokens, oldest first (never the tokens themselves).
    pub fn tokens(&self, tenant_id: i64) -> Result<Vec<TokenInfo>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                "SELECT id, created_at_ms, last_used_ms, expires_at_ms, revoked_at_ms FROM tokens
                 WHERE tenant_id = ?1 ORDER BY created_at_ms, id",
                args![tenant_id],
            )
        })?;
        rows.iter().map(|r| token_row(r, 0)).collect()
    }

    /// Revokes a tenant's token by its id; `false`: the tenant has no such token.
    pub fn revoke_token(&self, tenant_id: i64, id: &str) -> Result<bool, CatalogError> {
        let changed = self.db.run(|sql| {
            sql.execute(
                "UPDATE tokens SET revoked_at_ms = COALESCE(revoked_at_ms, ?3) WHERE tenant_id = ?1 AND id = ?2",
                args![tenant_id, id, now_ms()],
            )
        })?;
        Ok(changed > 0)
    }

    // Collections and their connection.

    pub fn create_collection(
        &self,
        tenant: &Tenant,
        name: &str,
        group: &str,
        connection: Option<&KafkaConnection>,
        table_format: Option<TableFormat>,
    ) -> Result<Collection, CatalogError> {
        let created_at_ms = now_ms();
        let id: i64 = self
            .db
            .run(|sql| {
                let sealed = sealed::seal(&self.keyring(), &tenant.name, name, connection);
                sql.query_one(
                    "INSERT INTO collections (tenant_id, name, grp, connection, created_at_ms, table_format)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                    args![tenant.id, name, group, sealed, created_at_ms, table_format.map(TableFormat::as_str)],
                )
            })
            .map_err(unique(|| format!("collection `{name}`")))?
            .get(0)?;
        Ok(Collection {
            id,
            tenant: tenant.name.clone(),
            name: name.into(),
            group: group.into(),
            connection: connection.cloned(),
            created_at_ms,
            table_format,
        })
    }

    pub fn collections(&self, tenant: &Tenant) -> Result<Vec<Collection>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                &format!(
                    "SELECT {COLLECTION_COLUMNS} FROM collections c JOIN tenants t ON t.id = c.tenant_id
                     WHERE c.tenant_id = ?1 ORDER BY c.name"
                ),
                args![tenant.id],
            )
        })?;
        let keyring = self.keyring();
        rows.iter().map(|r| collection_row(r, &keyring)).collect()
    }

    pub fn collection(&self, tenant: &Tenant, name: &str) -> Result<Option<Collection>, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_opt(
                &format!(
                    "SELECT {COLLECTION_COLUMNS} FROM collections c JOIN tenants t ON t.id = c.tenant_id
                     WHERE c.tenant_id = ?1 AND c.name = ?2"
                ),
                args![tenant.id, name],
            )
        })?;
        row.map(|r| collection_row(&r, &self.keyring())).transpose()
    }

    pub fn set_connection(&self, collection: &Collection, connection: &KafkaConnection) -> Result<(), CatalogError> {
        self.db.run(|sql| {
            let sealed = sealed::seal(&self.keyring(), &collection.tenant, &collection.name, Some(connection));
            sql.execute("UPDATE collections SET connection = ?1 WHERE id = ?2", args![sealed, collection.id])
        })?;
        Ok(())
    }

    /// Deletes a collection that has no publishers left, and everything its
    /// publishers committed: tables, versions, offsets, executions, dead letters.
    /// Returns false when publishers remain.
    pub fn delete_collection(&self, collection: &Collection) -> Result<bool, CatalogError> {
        self.db.transaction(|tx| {
            let publishers: i64 = tx
                .query_one("SELECT COUNT(*) FROM publishers WHERE collection_id = ?1", args![collection.id])?
                .get(0)?;
            if publishers > 0 {
                return Ok(false);
            }
            let scope = collection.scope();
            delete_scope(tx, &scope, &format!("{scope}/"))?;
            tx.execute("DELETE FROM collections WHERE id = ?1", args![collection.id])?;
            Ok(true)
        })
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
        let now = now_ms();
        let insert =
            "INSERT INTO publishers (collection_id, name, declaration, plugin_sha256, created_at_ms, updated_at_ms)
                      VALUES (?1, ?2, ?3, ?4, ?5, ?5)";
        self.db
            .run(|sql| {
                let args = args![collection.id, name, declaration, plugin, now];
                if update {
                    sql.execute(
                        &format!(
                            "{insert} ON CONFLICT (collection_id, name) DO UPDATE SET declaration = excluded.declaration,
                             plugin_sha256 = excluded.plugin_sha256, updated_at_ms = excluded.updated_at_ms"
                        ),
                        args,
                    )
                } else {
                    sql.execute(insert, args)
                }
            })
            .map_err(unique(|| format!("publisher `{}/{name}`", collection.name)))?;
        Ok(())
    }

    fn query_publishers(&self, filter: &str, args: &[Value]) -> Result<Vec<PublisherRecord>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                &format!(
                    "SELECT {PUBLISHER_COLUMNS} FROM publishers p JOIN collections c ON c.id = p.collection_id
                     JOIN tenants t ON t.id = c.tenant_id WHERE {filter} ORDER BY t.name, c.name, p.name"
                ),
                args,
            )
        })?;
        let keyring = self.keyring();
        rows.iter().map(|r| publisher_row(r, &keyring)).collect()
    }

    /// Every registered publisher of every tenant (what `weir serve` starts on boot).
    pub fn all_publishers(&self) -> Result<Vec<PublisherRecord>, CatalogError> {
        self.query_publishers("1 = 1", &[])
    }

    pub fn tenant_publishers(&self, tenant: &Tenant) -> Result<Vec<PublisherRecord>, CatalogError> {
        self.query_publishers("t.id = ?1", args![tenant.id])
    }

    pub fn publishers(&self, collection: &Collection) -> Result<Vec<PublisherRecord>, CatalogError> {
        self.query_publishers("c.id = ?1", args![collection.id])
    }

    pub fn publisher(&self, collection: &Collection, name: &str) -> Result<Option<PublisherRecord>, CatalogError> {
        Ok(self.query_publishers("c.id = ?1 AND p.name = ?2", args![collection.id, name])?.pop())
    }

    pub fn set_paused(&self, publisher: &PublisherRecord, paused: bool) -> Result<(), CatalogError> {
        self.db.run(|sql| {
            sql.execute(
                "UPDATE publishers SET paused = ?1, updated_at_ms = ?2 WHERE id = ?3",
                args![paused, now_ms(), publisher.id],
            )
        })?;
        Ok(())
    }

    /// Deletes a publisher. Its table, versions and offsets stay: registering
    /// it again resumes where it stopped, without re-reading the topic.
    pub fn delete_publisher(&self, publisher: &PublisherRecord) -> Result<(), CatalogError> {
        self.db.run(|sql| sql.execute("DELETE FROM publishers WHERE id = ?1", args![publisher.id]))?;
        Ok(())
    }
}

fn delete_scope(tx: &mut dyn Sql, scope: &str, prefix: &str) -> Result<(), CatalogError> {
    let starts = "substr(publisher, 1, ?2) = ?1";
    let prefix = args![prefix, prefix.chars().count() as i64];
    tx.execute(
        "DELETE FROM table_versions WHERE table_id IN (SELECT id FROM tables WHERE collection = ?1)",
        args![scope],
    )?;
    tx.execute("DELETE FROM tables WHERE collection = ?1", args![scope])?;
    tx.execute(&format!("DELETE FROM source_offsets WHERE {starts}"), prefix)?;
    tx.execute(&format!("DELETE FROM executions WHERE {starts}"), prefix)?;
    tx.execute("DELETE FROM dead_letters WHERE collection = ?1", args![scope])?;
    Ok(())
}
