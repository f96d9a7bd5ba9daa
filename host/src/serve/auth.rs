//! Bearer tokens. A token is `weir_` and 40 random hex digits; only its
//! sha256 is stored. The admin token manages tenants; a tenant's token sees
//! and touches only that tenant's objects, until it expires or is revoked.
//! Every refused token is written to the audit log. A request without a
//! token may come with a console session instead, opened with one
//! (`console::sessions`): it is authorized as that token's would be.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use super::App;
use super::error::ApiError;
use crate::catalog::{Tenant, TokenInfo};

pub fn new_token() -> String {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).expect("the OS random source");
    format!("weir_{}", hex::encode(bytes))
}

pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Equal, in time that depends only on the lengths (no early exit on the first difference).
pub(super) fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Refuses a request, and says so in the audit log.
pub(super) fn refuse(app: &App, parts: &Parts, error: ApiError, token: Option<&str>) -> ApiError {
    let reason = if error.status == axum::http::StatusCode::FORBIDDEN { "forbidden" } else { "unauthorized" };
    app.audit.record(
        "auth.refused",
        serde_json::json!({
            "status": error.status.as_u16(), "reason": reason, "token_id": token,
            "method": parts.method.as_str(), "path": parts.uri.path(), "error": error.message,
        }),
    );
    error
}

fn bearer(parts: &Parts) -> Result<String, ApiError> {
    let header = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
        ApiError::unauthorized("no token: send `Authorization: Bearer <token>` (the CLI takes --token or WEIR_TOKEN)")
    })?;
    let token = header.to_str().ok().and_then(|h| h.strip_prefix("Bearer ")).map(str::trim);
    token
        .filter(|t| !t.is_empty())
        .map(token_sha256)
        .ok_or_else(|| ApiError::unauthorized("the Authorization header must be `Bearer <token>`"))
}

/// The sha256 of the token a request acts with: its bearer token's, or that
/// of the token its console session was opened with.
fn credential(app: &App, parts: &Parts) -> Result<String, ApiError> {
    if !parts.headers.contains_key(AUTHORIZATION)
        && let Some(session) = app.sessions.of(parts)?
    {
        return Ok(session.token_sha256);
    }
    bearer(parts)
}

/// Who a token (by its sha256) acts for now: `None` for the admin, or its
/// tenant's name; an error saying why not when it is unknown, revoked or expired.
pub(super) fn holder(app: &App, sha: &str) -> Result<Option<String>, ApiError> {
    if constant_time_eq(sha, &app.admin_token_sha256) {
        return Ok(None);
    }
    match app.catalog.tenant_by_token(sha)? {
        Some((tenant, token)) if token.usable(crate::catalog::now_ms()) => Ok(Some(tenant.name)),
        Some((tenant, token)) => Err(unusable(&tenant.name, &token)),
        None => Err(ApiError::unauthorized("the token is not valid: check it, or ask the admin for one")),
    }
}

/// The tenant a request acts for.
pub struct Caller(pub Tenant);

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let sha = credential(app, parts).map_err(|e| refuse(app, parts, e, None))?;
        if let Some((tenant, token)) = app.catalog.tenant_by_token(&sha)? {
            if token.usable(crate::catalog::now_ms()) {
                return Ok(Caller(tenant));
            }
            return Err(refuse(app, parts, unusable(&tenant.name, &token), Some(&token.id)));
        }
        if constant_time_eq(&sha, &app.admin_token_sha256) {
            return Err(refuse(
                app,
                parts,
                ApiError::forbidden(
                    "the admin token manages tenants only: use a tenant's token (`weir tenant create NAME` gives one)",
                ),
                Some("admin"),
            ));
        }
        Err(refuse(app, parts, ApiError::unauthorized("the token is not valid: check --token or WEIR_TOKEN"), None))
    }
}

/// A request made with the admin token.
pub struct Admin;

impl FromRequestParts<Arc<App>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let sha = credential(app, parts).map_err(|e| refuse(app, parts, e, None))?;
        if constant_time_eq(&sha, &app.admin_token_sha256) {
            return Ok(Admin);
        }
        if let Some((_, token)) = app.catalog.tenant_by_token(&sha)? {
            let error = ApiError::forbidden("this needs the admin token, not a tenant's");
            return Err(refuse(app, parts, error, Some(&token.id)));
        }
        Err(refuse(app, parts, ApiError::unauthorized("the token is not valid: check --token or WEIR_TOKEN"), None))
    }
}

/// Why a known token is refused: revoked, or expired.
fn unusable(tenant: &str, token: &TokenInfo) -> ApiError {
    let when = |ms: i64| {
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64))
    };
    let fix = format!("ask the admin for a new one (`weir tenant token {tenant}`)");
    match token.revoked_at_ms {
        Some(at) => ApiError::unauthorized(format!("token {} was revoked at {}: {fix}", token.id, when(at))),
        None => ApiError::unauthorized(format!(
            "token {} expired at {}: {fix}",
            token.id,
            when(token.expires_at_ms.unwrap_or_default())
        )),
    }
}
