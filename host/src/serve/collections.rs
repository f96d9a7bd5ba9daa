//! Collections and their `kafka-topic-in` connection.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::request::{body, check_name};
use crate::catalog::{Collection, Tenant};
use crate::publisher::source::KafkaConnection;
use crate::sources::kafka;
use crate::tables::TableFormat;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewCollection {
    name: String,
    #[serde(default = "default_group")]
    group: String,
    connection: Option<KafkaConnection>,
    /// Its publishers' tables' format when their declaration names none.
    table_format: Option<String>,
}

fn default_group() -> String {
    "sources".into()
}

/// The tenant's collection `name`, or a 404 that says how to create it.
pub fn find(app: &App, tenant: &Tenant, name: &str) -> ApiResult<Collection> {
    app.catalog.collection(tenant, name)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "collection `{name}` does not exist: create it with `weir collection create {name} --bootstrap-servers HOST:PORT`"
        ))
    })
}

/// The collection's connection, or a 422 that says how to add one.
pub fn connection(collection: &Collection) -> ApiResult<&KafkaConnection> {
    collection.connection.as_ref().ok_or_else(|| {
        ApiError::invalid(format!(
            "collection `{}` has no kafka-topic-in connection: add one with `weir connection set {} --bootstrap-servers HOST:PORT`",
            collection.name, collection.name
        ))
    })
}

fn check_connection(connection: &KafkaConnection) -> ApiResult<()> {
    if connection.bootstrap_servers.trim().is_empty() {
        return Err(ApiError::invalid("the connection needs bootstrap_servers: `host:port[,host:port]`"));
    }
    connection.check_for_server().map_err(ApiError::invalid)
}

pub fn view(app: &App, collection: &Collection) -> ApiResult<Value> {
    let publishers: Vec<String> = app.catalog.publishers(collection)?.into_iter().map(|p| p.name).collect();
    let tables: Vec<String> = app.catalog.tables(&collection.scope())?.into_iter().map(|t| t.name).collect();
    Ok(json!({
        "name": collection.name,
        "group": collection.group,
        "connection": collection.connection.as_ref().map(KafkaConnection::redacted),
        "table_format": collection.table_format_of(None),
        "publishers": publishers,
        "tables": tables,
        "created_at_ms": collection.created_at_ms,
    }))
}

pub async fn create(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: NewCollection = body(&bytes)?;
    check_name("collection", &req.name)?;
    check_name("group", &req.group)?;
    if let Some(c) = &req.connection {
        check_connection(c)?;
    }
    let table_format = req.table_format.as_deref().map(TableFormat::parse).transpose().map_err(ApiError::invalid)?;
    let collection =
        app.catalog.create_collection(&tenant, &req.name, &req.group, req.connection.as_ref(), table_format)?;
    Ok((StatusCode::CREATED, Json(view(&app, &collection)?)))
}

pub async fn list(Caller(tenant): Caller, State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    let views = app.catalog.collections(&tenant)?.iter().map(|c| view(&app, c)).collect::<ApiResult<Vec<_>>>()?;
    Ok(Json(json!(views)))
}

pub async fn show(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(view(&app, &find(&app, &tenant, &name)?)?))
}

/// Deletes an empty collection with its tables; refuses while publishers remain.
pub async fn delete(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let collection = find(&app, &tenant, &name)?;
    if !app.catalog.delete_collection(&collection)? {
        return Err(ApiError::conflict(format!(
            "collection `{name}` still has publishers: delete them first (`weir publisher delete {name}/NAME`)"
        )));
    }
    let (task_app, files) = (app.clone(), format!("tables/{}", collection.scope()));
    if let Ok(Err(e)) = tokio::task::spawn_blocking(move || task_app.catalog.store().delete_all(&files)).await {
        tracing::warn!(error = %format!("{e:#}"), "removing a deleted collection's files");
    }
    Ok(Json(json!({ "deleted": name })))
}

/// Sets or replaces the connection; running publishers restart on the new one.
pub async fn set_connection(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let connection: KafkaConnection = body(&bytes)?;
    check_connection(&connection)?;
    let collection = find(&app, &tenant, &name)?;
    app.catalog.set_connection(&collection, &connection)?;
    // A worker's fingerprint holds its connection: every node restarts them.
    super::cluster::reconcile(&app).await;
    Ok(Json(view(&app, &find(&app, &tenant, &name)?)?))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CheckRequest {
    topic: Option<String>,
}

/// Checks that the brokers answer and, given a topic, that it exists.
pub async fn check(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let req: CheckRequest = if bytes.is_empty() { CheckRequest::default() } else { body(&bytes)? };
    let collection = find(&app, &tenant, &name)?;
    let connection = connection(&collection)?.clone();
    let found = check_broker(&app, connection, req.topic.clone()).await?;
    let message = match &req.topic {
        Some(_) => "connection check passed and the topic exists",
        None => "connection check passed",
    };
    Ok(Json(json!({
        "message": message,
        "brokers": found.brokers,
        "topic": req.topic,
        "partitions": found.partitions,
    })))
}

/// The connection check, off the reactor; a failure is the user's to fix (422).
pub async fn check_broker(
    app: &App,
    connection: KafkaConnection,
    topic: Option<String>,
) -> ApiResult<kafka::BrokerCheck> {
    let timeout = app.config.check_timeout;
    tokio::task::spawn_blocking(move || kafka::check(&connection, topic.as_deref(), timeout))
        .await?
        .map_err(|e| ApiError::invalid(e.to_string()))
}
