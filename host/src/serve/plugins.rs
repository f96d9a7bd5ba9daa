//! Module upload: size cap, sha256, validated and compiled once, stored
//! content-addressed in `modules/<sha256>.wasm` (in the store: every node of
//! a cluster loads it from there). The same bytes uploaded twice are one module.

use std::sync::Arc;

use anyhow::Context as _;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use crate::catalog::{ModuleFacts, valid_plugin_name};
use crate::plugin::{Plugin, digest, human_bytes, language};

/// A module's key in the store: `modules/<hex>.wasm`, by its `sha256:<hex>` digest.
fn module_key(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("modules/{hex}.wasm")
}

/// `POST /v1/plugins[?name=NAME]`: the module's bytes; `name` points a name
/// the tenant picks at it (again and again as new builds are pushed).
#[derive(Debug, serde::Deserialize)]
pub struct UploadQuery {
    name: Option<String>,
}

pub async fn upload(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Query(query): Query<UploadQuery>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if let Some(name) = &query.name
        && !valid_plugin_name(name)
    {
        return Err(ApiError::invalid(format!(
            "{name:?} cannot name a plugin: use lowercase letters, digits, `_`, `-` and `.`, starting with a letter or digit"
        )));
    }
    let limit = tenant.quotas.max_module_bytes.min(app.config.max_module_bytes);
    if bytes.len() as u64 > limit {
        return Err(ApiError::too_large(format!(
            "the module is {}, over tenant `{}`'s {} module size limit: build it in release mode with `strip = true` and `lto = true`",
            human_bytes(bytes.len() as u64),
            tenant.name,
            human_bytes(limit)
        )));
    }
    let sha256 = digest(&bytes);
    let size = bytes.len() as u64;
    let key = module_key(&sha256);
    let known = app.catalog.plugin(&tenant, &sha256)?;
    let task_app = app.clone();
    let (language, contract) = tokio::task::spawn_blocking(move || -> ApiResult<(String, &'static str)> {
        // Validates (component, world, import allow-list) and compiles into the
        // artifact cache (a module already uploaded comes from the cache).
        let plugin = task_app
            .runtime
            .load(&bytes)
            .map_err(|e| ApiError::invalid(format!("the plugin was not accepted: {e}")))?;
        if known.is_none() {
            // The same bytes under the same name: whoever stored them first, they are these.
            task_app.catalog.store().create(&key, bytes.clone()).context("storing the module")?;
        }
        Ok((language(&bytes), plugin.contract()))
    })
    .await??;
    let facts = ModuleFacts { sha256: &sha256, size, language: &language, contract };
    let new = app.catalog.add_plugin(&tenant, facts, query.name.as_deref())?;
    if new {
        tracing::info!(tenant = %tenant.name, %sha256, size, %language, contract, name = query.name, "plugin uploaded");
    }
    let status = if new { StatusCode::CREATED } else { StatusCode::OK };
    let answer = json!({
        "sha256": sha256, "size": size, "new": new, "name": query.name, "language": language, "contract": contract,
    });
    Ok((status, Json(answer)))
}

pub async fn list(Caller(tenant): Caller, State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(app.catalog.plugins(&tenant)?)))
}

/// The digest a publisher's `plugin` names: `sha256:<hex>` (or the bare hex)
/// of a module the tenant uploaded, or a name it pushed one under.
pub fn resolve(app: &App, tenant: &crate::catalog::Tenant, plugin: &str) -> ApiResult<String> {
    let hex = plugin.strip_prefix("sha256:").unwrap_or(plugin);
    let is_digest = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    if plugin.starts_with("sha256:") || is_digest {
        let digest = format!("sha256:{hex}");
        if app.catalog.plugin(tenant, &digest)?.is_none() {
            return Err(ApiError::not_found(format!(
                "plugin {digest} is not uploaded: push it first with `weir plugin push FILE.wasm`"
            )));
        }
        return Ok(digest);
    }
    app.catalog.plugin_named(tenant, plugin)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "no plugin is named `{plugin}`: push one under that name with `weir plugin push FILE.wasm --name {plugin}`, or give a component file or a sha256: digest (`weir plugin list` shows them)"
        ))
    })
}

/// Loads a stored module (from the artifact cache: compiled at upload), or
/// shares the one loaded already for another publisher. Blocking.
pub fn load(app: &App, sha256: &str) -> anyhow::Result<Plugin> {
    let digest = format!("sha256:{}", sha256.strip_prefix("sha256:").unwrap_or(sha256));
    if let Some(plugin) = app.runtime.loaded(&digest) {
        return Ok(plugin);
    }
    let store = app.catalog.store();
    let key = module_key(sha256);
    let bytes = store.get(&key)?.with_context(|| format!("module {} is missing", store.location(&key)))?;
    Ok(app.runtime.load(&bytes).with_context(|| format!("loading module {sha256}"))?)
}
