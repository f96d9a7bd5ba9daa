//! Server administration (admin only): the secret key connections are sealed under.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
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
