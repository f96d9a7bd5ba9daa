//! Module upload: size cap, sha256, validated and compiled once, stored
//! content-addressed in `modules/<sha256>.wasm` (in the store: every node of
//! a cluster loads it from there). The same bytes uploaded twice are one module.

use std::sync::Arc;

use anyhow::Context as _;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use crate::plugin::{Plugin, digest, human_bytes};

/// A module's key in the store: `modules/<hex>.wasm`, by its `sha256:<hex>` digest.
fn module_key(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("modules/{hex}.wasm")
}

pub async fn upload(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
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
    if app.catalog.plugin(&tenant, &sha256)?.is_some() {
        return Ok((StatusCode::OK, Json(json!({ "sha256": sha256, "size": size, "new": false }))));
    }
    let key = module_key(&sha256);
    let task_app = app.clone();
    tokio::task::spawn_blocking(move || -> ApiResult<()> {
        // Validates (component, world, import allow-list) and compiles into the artifact cache.
        task_app.runtime.load(&bytes).map_err(|e| ApiError::invalid(format!("the plugin was not accepted: {e}")))?;
        // The same bytes under the same name: whoever stored them first, they are these.
        task_app.catalog.store().create(&key, bytes).context("storing the module")?;
        Ok(())
    })
    .await??;
    app.catalog.add_plugin(&tenant, &sha256, size)?;
    tracing::info!(tenant = %tenant.name, %sha256, size, "plugin uploaded");
    Ok((StatusCode::CREATED, Json(json!({ "sha256": sha256, "size": size, "new": true }))))
}

pub async fn list(Caller(tenant): Caller, State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(app.catalog.plugins(&tenant)?)))
}

/// Loads a stored module (from the artifact cache: compiled at upload). Blocking.
pub fn load(app: &App, sha256: &str) -> anyhow::Result<Plugin> {
    let store = app.catalog.store();
    let key = module_key(sha256);
    let bytes = store.get(&key)?.with_context(|| format!("module {} is missing", store.location(&key)))?;
    Ok(app.runtime.load(&bytes).with_context(|| format!("loading module {sha256}"))?)
}
