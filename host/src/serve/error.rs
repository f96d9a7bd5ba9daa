//! API errors: a status and a message that says what to do, as JSON
//! `{"error": "..."}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::catalog::CatalogError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

macro_rules! constructors {
    ($($name:ident => $status:ident),* $(,)?) => {
        impl ApiError {
            $(pub fn $name(message: impl Into<String>) -> Self {
                Self { status: StatusCode::$status, message: message.into() }
            })*
        }
    };
}

constructors! {
    bad_request => BAD_REQUEST,
    unauthorized => UNAUTHORIZED,
    forbidden => FORBIDDEN,
    not_found => NOT_FOUND,
    conflict => CONFLICT,
    too_large => PAYLOAD_TOO_LARGE,
    invalid => UNPROCESSABLE_ENTITY,
    internal => INTERNAL_SERVER_ERROR,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = %self.status, error = %self.message, "request failed");
        }
        (self.status, axum::Json(serde_json::json!({ "error": self.message }))).into_response()
    }
}

impl From<CatalogError> for ApiError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Exists(what) => Self::conflict(format!("{what} already exists")),
            e @ CatalogError::RerunGone { .. } => Self::conflict(e.to_string()),
            other => Self::internal(other.to_string()),
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        Self::internal(format!("{e:#}"))
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        Self::internal(format!("a server task failed: {e}"))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
