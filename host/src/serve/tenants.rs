//! Tenants and their tokens (admin only).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::api::{body, check_name};
use super::auth::{Admin, new_token as generate, token_sha256};
use super::error::{ApiError, ApiResult};
use crate::catalog::Quotas;

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
    if req.quotas.max_module_bytes > app.config.max_module_bytes {
        return Err(ApiError::invalid(format!(
            "quotas.max_module_bytes {} is over this server's --max-module-size of {} bytes",
            req.quotas.max_module_bytes, app.config.max_module_bytes
        )));
    }
    let tenant = app.catalog.create_tenant(&req.name, &req.quotas)?;
    let token = generate();
    app.catalog.add_token(tenant.id, &token_sha256(&token))?;
    Ok((StatusCode::CREATED, Json(json!({ "tenant": tenant, "token": token }))))
}

pub async fn list(_: Admin, State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(app.catalog.tenants()?)))
}

/// Another token for a tenant (e.g. to rotate one), shown only in this answer.
pub async fn new_token(
    _: Admin,
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let tenant = app.catalog.tenant(&name)?.ok_or_else(|| {
        ApiError::not_found(format!("tenant `{name}` does not exist: create it with `weir tenant create {name}`"))
    })?;
    let token = generate();
    app.catalog.add_token(tenant.id, &token_sha256(&token))?;
    Ok((StatusCode::CREATED, Json(json!({ "tenant": tenant.name, "token": token }))))
}
