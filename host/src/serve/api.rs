//! The HTTP API's routes. Every body is JSON except module uploads (the
//! component's bytes) and table exports (parquet).

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};

use super::auth::Admin;
use super::error::ApiError;
use super::{App, admin, collections, dead_letters, plugins, publishers, reprocess, tables, tenants};

pub fn router(app: Arc<App>) -> Router {
    let c = "/v1/collections/{collection}";
    let p = "/v1/collections/{collection}/publishers/{publisher}";
    let t = "/v1/collections/{collection}/tables/{table}";
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/admin/secret-key", get(admin::secret_key))
        .route("/v1/admin/secret-key/rotate", post(admin::rotate_secret_key))
        .route("/v1/admin/audit", get(admin::audit))
        .route("/v1/tenants", post(tenants::create).get(tenants::list))
        .route("/v1/tenants/{tenant}/tokens", post(tenants::new_token).get(tenants::tokens))
        .route("/v1/tenants/{tenant}/quotas", axum::routing::put(tenants::set_quotas))
        .route("/v1/tenants/{tenant}/tokens/{id}", axum::routing::delete(tenants::revoke_token))
        .route("/v1/collections", post(collections::create).get(collections::list))
        .route(c, get(collections::show).delete(collections::delete))
        .route(&format!("{c}/connection"), axum::routing::put(collections::set_connection))
        .route(&format!("{c}/connection/check"), post(collections::check))
        .route(
            "/v1/plugins",
            post(plugins::upload)
                .get(plugins::list)
                .layer(DefaultBodyLimit::max(app.config.max_module_bytes as usize + 1)),
        )
        .route("/v1/publishers", get(publishers::list_all))
        .route(&format!("{c}/publishers"), post(publishers::register).get(publishers::list))
        .route(p, get(publishers::status).delete(publishers::delete))
        .route(&format!("{p}/pause"), post(publishers::pause))
        .route(&format!("{p}/resume"), post(publishers::resume))
        .route(&format!("{p}/reprocess"), post(reprocess::reprocess))
        .route(&format!("{p}/executions"), get(publishers::executions))
        .route(&format!("{p}/dead-letters"), get(dead_letters::list))
        .route(&format!("{p}/dead-letters/{{partition}}/{{offset}}"), get(dead_letters::show))
        .route(&format!("{p}/dead-letters/rerun"), post(dead_letters::rerun))
        .route("/v1/executions/{id}", get(publishers::execution))
        .route(&format!("{c}/tables"), get(tables::list))
        .route(t, get(tables::show))
        .route(&format!("{t}/schema"), get(tables::schema))
        .route(&format!("{t}/versions"), get(tables::versions))
        .route(&format!("{t}/sample"), get(tables::sample))
        .route(&format!("{t}/files"), get(tables::files))
        .route(&format!("{t}/export"), get(tables::export))
        .route(&format!("{t}/vacuum"), post(tables::vacuum))
        // An Iceberg REST catalog (read-only) over the tenant's Iceberg tables.
        .merge(super::iceberg::router())
        // The web console: a page over these same routes, signed in with a session cookie.
        .merge(super::console::router())
        .fallback(|| async { ApiError::not_found("no such endpoint: see the README's API section") })
        .with_state(app)
}

async fn health(State(app): State<Arc<App>>) -> impl IntoResponse {
    let publishers: serde_json::Map<String, serde_json::Value> =
        app.supervisor.counts().into_iter().map(|(state, n)| (state.to_string(), n.into())).collect();
    let consumers = app.supervisor.node().sources.kafka.consumers();
    axum::Json(serde_json::json!({ "status": "ok", "publishers": publishers, "kafka_consumers": consumers }))
}

async fn metrics(_: Admin, State(app): State<Arc<App>>) -> impl IntoResponse {
    let task_app = app.clone();
    let (nodes, unlogged) = tokio::task::spawn_blocking(move || {
        (super::cluster::metrics(&task_app), task_app.catalog.unlogged().unwrap_or_default())
    })
    .await
    .unwrap_or_default();
    let consumers = app.supervisor.node().sources.kafka.consumers();
    let text = app.supervisor.metrics().render(&app.supervisor.counts(), &nodes, &unlogged, consumers);
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
}
