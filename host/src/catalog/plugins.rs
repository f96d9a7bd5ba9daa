//! A tenant's uploaded plugins: each module by its digest, with what it is
//! (size, language, contract), and the names a tenant pushed it under. A name
//! points at the module last pushed with it; a publisher registered by name
//! keeps the digest the name had then, so pushing again changes no running
//! publisher until it is registered again.

use serde::Serialize;

use super::control::Tenant;
use super::db::{Migration, Row, args};
use super::{Catalog, CatalogError, now_ms};

/// 7: what each module is, and the names it was pushed under.
pub(super) const PLUGIN_NAMES_MIGRATION: Migration = Migration {
    sqlite: "ALTER TABLE plugins ADD COLUMN language TEXT;
        ALTER TABLE plugins ADD COLUMN contract TEXT;
        CREATE TABLE plugin_names (
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            pushed_at_ms INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, name)
        );",
    postgres: "ALTER TABLE plugins ADD COLUMN language TEXT;
        ALTER TABLE plugins ADD COLUMN contract TEXT;
        CREATE TABLE plugin_names (
            tenant_id BIGINT NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            pushed_at_ms BIGINT NOT NULL,
            PRIMARY KEY (tenant_id, name)
        );",
};

/// An uploaded module, as `weir plugin list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PluginModule {
    pub sha256: String,
    pub size: u64,
    /// When it was first pushed.
    pub created_at_ms: i64,
    /// The language it was written in, as its build tools recorded it
    /// (`None` for modules pushed before weir kept it).
    pub language: Option<String>,
    /// The `weir:publisher` version it implements.
    pub contract: Option<String>,
    /// The names that point at it now.
    pub names: Vec<String>,
}

/// What the upload handler learned of a module.
#[derive(Debug, Clone, Copy)]
pub struct ModuleFacts<'a> {
    pub sha256: &'a str,
    pub size: u64,
    pub language: &'a str,
    pub contract: &'a str,
}

const COLUMNS: &str = "sha256, size, created_at_ms, language, contract";

fn module_row(r: &Row) -> Result<PluginModule, CatalogError> {
    Ok(PluginModule {
        sha256: r.get(0)?,
        size: r.get(1)?,
        created_at_ms: r.get(2)?,
        language: r.get(3)?,
        contract: r.get(4)?,
        names: Vec::new(),
    })
}

/// Whether `name` may name a plugin: what a table or publisher name may be.
pub fn valid_plugin_name(name: &str) -> bool {
    crate::plugin::valid_table_name(name)
}

impl Catalog {
    /// Records that a tenant uploaded a module (false when it already had),
    /// and points `name`, if given, at it.
    pub fn add_plugin(&self, tenant: &Tenant, module: ModuleFacts, name: Option<&str>) -> Result<bool, CatalogError> {
        let now = now_ms();
        self.db.transaction(|tx| {
            let known = tx
                .query_opt("SELECT 1 FROM plugins WHERE tenant_id = ?1 AND sha256 = ?2", args![tenant.id, module.sha256])?
                .is_some();
            // Modules pushed before weir kept their language and contract learn them now.
            tx.execute(
                "INSERT INTO plugins (tenant_id, sha256, size, created_at_ms, language, contract)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (tenant_id, sha256) DO UPDATE SET
                    language = COALESCE(plugins.language, excluded.language),
                    contract = COALESCE(plugins.contract, excluded.contract)",
                args![tenant.id, module.sha256, module.size as i64, now, module.language, module.contract],
            )?;
            if let Some(name) = name {
                tx.execute(
                    "INSERT INTO plugin_names (tenant_id, name, sha256, pushed_at_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET sha256 = excluded.sha256, pushed_at_ms = excluded.pushed_at_ms",
                    args![tenant.id, name, module.sha256, now],
                )?;
            }
            Ok(!known)
        })
    }

    /// Every module the tenant uploaded, oldest first, each with its names.
    pub fn plugins(&self, tenant: &Tenant) -> Result<Vec<PluginModule>, CatalogError> {
        let (modules, names) = self.db.run(|sql| {
            let modules = sql.query(
                &format!("SELECT {COLUMNS} FROM plugins WHERE tenant_id = ?1 ORDER BY created_at_ms, sha256"),
                args![tenant.id],
            )?;
            let names = sql
                .query("SELECT name, sha256 FROM plugin_names WHERE tenant_id = ?1 ORDER BY name", args![tenant.id])?;
            Ok((modules, names))
        })?;
        let mut modules = modules.iter().map(module_row).collect::<Result<Vec<_>, _>>()?;
        for row in &names {
            let (name, sha256): (String, String) = (row.get(0)?, row.get(1)?);
            if let Some(module) = modules.iter_mut().find(|m| m.sha256 == sha256) {
                module.names.push(name);
            }
        }
        Ok(modules)
    }

    /// The module with this digest, if the tenant uploaded it.
    pub fn plugin(&self, tenant: &Tenant, sha256: &str) -> Result<Option<PluginModule>, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_opt(
                &format!("SELECT {COLUMNS} FROM plugins WHERE tenant_id = ?1 AND sha256 = ?2"),
                args![tenant.id, sha256],
            )
        })?;
        row.as_ref().map(module_row).transpose()
    }

    /// The digest `name` points at, if the tenant pushed a module with it.
    pub fn plugin_named(&self, tenant: &Tenant, name: &str) -> Result<Option<String>, CatalogError> {
        let row = self.db.run(|sql| {
            sql.query_opt("SELECT sha256 FROM plugin_names WHERE tenant_id = ?1 AND name = ?2", args![tenant.id, name])
        })?;
        row.map(|r| r.get(0)).transpose()
    }
}
