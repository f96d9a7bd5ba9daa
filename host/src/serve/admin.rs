//! Server administration (admin only): the secret key connections are sealed
//! under, and this node's audit log.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use serde_json::{Value, json};

use super::App;
use super::auth::Admin;
use super::error::ApiResult;

/// The id of the key connections are sealed under (never the key).
pub async fn secret_key(_: Admin, State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({ "key_id": app.catalog.secret_key_id() }))
}

/// A new secret key; every stored connection resealed under it.
pub async fn rotate_secret_key(_: Admin, State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    let catalog = app.catalog.clone();
    let rotation = tokio::task::spawn_blocking(move || catalog.rotate_secret_key()).await??;
    app.audit.record("secret-key.rotate", json!(rotation));
    Ok(Json(json!(rotation)))
}

#[derive(serde::Deserialize)]
pub struct Recent {
    limit: Option<usize>,
}

/// `GET /v1/admin/audit?limit=N`: this node's last events (100 unless said, at most 1,000), newest first.
pub async fn audit(_: Admin, State(app): State<Arc<App>>, Query(q): Query<Recent>) -> ApiResult<Json<Value>> {
    let limit = q.limit.unwrap_or(100).min(1000);
    let task_app = app.clone();
    let events = tokio::task::spawn_blocking(move || task_app.audit.recent(limit)).await??;
    Ok(Json(json!(events)))
}
