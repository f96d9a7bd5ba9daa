//! What every handler does with a request before its own work: parse the
//! JSON body, check the names it carries. Below the handlers, so they and the
//! router both point down to it.

use serde::de::DeserializeOwned;

use super::error::{ApiError, ApiResult};
use crate::publisher::declaration::{Declaration, Resolved};

/// Parses a JSON request body, saying what is wrong with it.
pub fn body<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))
}

/// Tenant, collection and table names: a letter, then letters, digits, `_` or `-`.
pub fn check_name(kind: &str, name: &str) -> ApiResult<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= 64;
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "{kind} name {name:?} is invalid: use up to 64 letters, digits, `_` or `-`, starting with a letter"
        )))
    }
}

/// A publisher declaration, parsed and resolved, or why it is not valid.
pub fn resolve(declaration: &str) -> ApiResult<Resolved> {
    Declaration::parse(declaration)
        .and_then(|d| d.resolve(None))
        .map_err(|e| ApiError::invalid(format!("the publisher declaration is not valid: {e}")))
}
