//! Tenants and their tokens (admin only): issue (with an optional expiry),
//! list (never the token itself), revoke. Each action goes to the audit log.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::auth::{Admin, new_token as generate, token_sha256};
use super::error::{ApiError, ApiResult};
use super::request::{body, check_name};
use crate::catalog::{Quotas, now_ms};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTenant {
    name: String,
    #[serde(default)]
    quotas: Quotas,
}

/// Creates a tenant and its first token, which is shown only in this answer.
pub async fn create(_: Admin, State(app): State<Arc<App>>, bytes: Bytes) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: NewTenant = body(&bytes)?;
    check_name("tenant", &req.name)?;
    check_quotas(&app, &req.quotas)?;
    let tenant = app.catalog.create_tenant(&req.name, &req.quotas)?;
    let token = generate();
    let info = app.catalog.add_token(tenant.id, &token_sha256(&token), None)?;
    app.audit.record("tenant.create", json!({ "tenant": tenant.name, "quotas": tenant.quotas, "token_id": info.id }));
    Ok((StatusCode::CREATED, Json(json!({ "tenant": tenant, "token": token, "token_id": info.id }))))
}

/// `PUT /v1/tenants/{tenant}/quotas`: the quotas given change, the others
/// stay; its running publishers restart under them.
pub async fn set_quotas(
    _: Admin,
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let mut quotas = serde_json::to_value(tenant(&app, &name)?.quotas).expect("json");
    let changes: serde_json::Map<String, Value> = body(&bytes)?;
    for (key, value) in changes {
        quotas[key] = value;
    }
    let quotas: Quotas = serde_json::from_value(quotas).map_err(|e| ApiError::invalid(format!("quotas: {e}")))?;
    check_quotas(&app, &quotas)?;
    let tenant = tenant(&app, &name)?;
    app.catalog.set_quotas(&tenant, &quotas)?;
    app.audit.record("tenant.quotas", json!({ "tenant": name, "quotas": quotas }));
    super::cluster::reconcile(&app).await;
    Ok(Json(json!({ "name": name, "quotas": quotas })))
}

fn check_quotas(app: &App, quotas: &Quotas) -> ApiResult<()> {
    if quotas.max_module_bytes > app.config.max_module_bytes {
        return Err(ApiError::invalid(format!(
            "quotas.max_module_bytes {} is over this server's --max-module-size of {} bytes",
            quotas.max_module_bytes, app.config.max_module_bytes
        )));
    }
    if quotas.memory_limit_bytes > crate::plugin::MAX_MEMORY_BYTES {
        return Err(ApiError::invalid(format!(
            "quotas.memory_limit_bytes {} is over the {} a plugin can address",
            quotas.memory_limit_bytes,
            crate::plugin::human_bytes(crate::plugin::MAX_MEMORY_BYTES)
        )));
    }
    Ok(())
}

pub async fn list(_: Admin, State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(app.catalog.tenants()?)))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NewToken {
    /// Valid for this long from now; without it, until revoked.
    expires_in_secs: Option<u64>,
}

fn tenant(app: &App, name: &str) -> ApiResult<crate::catalog::Tenant> {
    app.catalog.tenant(name)?.ok_or_else(|| {
        ApiError::not_found(format!("tenant `{name}` does not exist: create it with `weir tenant create {name}`"))
    })
}

/// Another token for a tenant (e.g. to rotate one), shown only in this answer.
pub async fn new_token(
    _: Admin,
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: NewToken = if bytes.is_empty() { NewToken::default() } else { body(&bytes)? };
    let tenant = tenant(&app, &name)?;
    let token = generate();
    let expires_at_ms = req.expires_in_secs.map(|s| now_ms() + (s as i64).saturating_mul(1000));
    let info = app.catalog.add_token(tenant.id, &token_sha256(&token), expires_at_ms)?;
    app.audit
        .record("token.create", json!({ "tenant": tenant.name, "token_id": info.id, "expires_at_ms": expires_at_ms }));
    Ok((
        StatusCode::CREATED,
        Json(json!({ "tenant": tenant.name, "token": token, "token_id": info.id, "expires_at_ms": expires_at_ms })),
    ))
}

/// A tenant's tokens: id, created, last used, expiry, revocation; never the token.
pub async fn tokens(_: Admin, State(app): State<Arc<App>>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let tenant = tenant(&app, &name)?;
    Ok(Json(json!(app.catalog.tokens(tenant.id)?)))
}

/// Revokes a token: refused from the next request on.
pub async fn revoke_token(
    _: Admin,
    State(app): State<Arc<App>>,
    Path((name, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let tenant = tenant(&app, &name)?;
    if !app.catalog.revoke_token(tenant.id, &id)? {
        return Err(ApiError::not_found(format!(
            "tenant `{name}` has no token `{id}`: `weir tenant tokens {name}` lists them"
        )));
    }
    app.audit.record("token.revoke", json!({ "tenant": tenant.name, "token_id": id }));
    Ok(Json(json!({ "tenant": tenant.name, "token_id": id, "revoked": true })))
}
