//! Bearer tokens. A token is `weir_` and 40 random hex digits; only its
//! sha256 is stored. The admin token manages tenants; a tenant's token sees
//! and touches only that tenant's objects.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use super::App;
use super::error::ApiError;
use crate::catalog::Tenant;

pub fn new_token() -> String {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).expect("the OS random source");
    format!("weir_{}", hex::encode(bytes))
}

pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
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

/// The tenant a request acts for.
pub struct Caller(pub Tenant);

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let sha = bearer(parts)?;
        if let Some(tenant) = app.catalog.tenant_by_token(&sha)? {
            return Ok(Caller(tenant));
        }
        if sha == app.admin_token_sha256 {
            return Err(ApiError::forbidden(
                "the admin token manages tenants only: use a tenant's token (`weir tenant create NAME` gives one)",
            ));
        }
        Err(ApiError::unauthorized("the token is not valid: check --token or WEIR_TOKEN"))
    }
}

/// A request made with the admin token.
pub struct Admin;

impl FromRequestParts<Arc<App>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let sha = bearer(parts)?;
        if sha == app.admin_token_sha256 {
            return Ok(Admin);
        }
        if app.catalog.tenant_by_token(&sha)?.is_some() {
            return Err(ApiError::forbidden("this needs the admin token, not a tenant's"));
        }
        Err(ApiError::unauthorized("the token is not valid: check --token or WEIR_TOKEN"))
    }
}
