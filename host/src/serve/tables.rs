//! Tables: list, schema, versions, a sample of rows, a parquet export.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::collections;
use super::error::{ApiError, ApiResult};
use crate::catalog::Tenant;
use crate::tables::{self, Snapshot, TableError};

#[derive(Deserialize)]
pub struct At {
    version: Option<i64>,
    limit: Option<usize>,
    /// Where a page of rows (or of files) starts.
    offset: Option<usize>,
}

impl From<TableError> for ApiError {
    fn from(e: TableError) -> Self {
        match e {
            TableError::Empty(_) | TableError::NoVersion { .. } => ApiError::not_found(e.to_string()),
            // The version exists but cannot be read (yet): nothing the request can change.
            TableError::Unlogged { .. } | TableError::DeletionVectors { .. } => ApiError::conflict(e.to_string()),
            other => ApiError::internal(other.to_string()),
        }
    }
}

/// The collection key of the tenant's collection, checking that `table` exists in it.
fn locate(app: &App, tenant: &Tenant, collection: &str, table: &str) -> ApiResult<String> {
    let scope = collections::find(app, tenant, collection)?.scope();
    if !app.catalog.tables(&scope)?.iter().any(|t| t.name == table) {
        return Err(ApiError::not_found(format!(
            "table `{collection}/{table}` does not exist (yet): its publisher creates it with its first commit"
        )));
    }
    Ok(scope)
}

async fn snapshot(
    app: &Arc<App>,
    tenant: &Tenant,
    collection: &str,
    table: &str,
    version: Option<i64>,
) -> ApiResult<Snapshot> {
    let scope = locate(app, tenant, collection, table)?;
    // Reading the log may be requests to an object store: off the reactor.
    let (app, table) = (app.clone(), table.to_string());
    Ok(tokio::task::spawn_blocking(move || tables::snapshot(&app.catalog, &scope, &table, version)).await??)
}

pub async fn list(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(collection): Path<String>,
) -> ApiResult<Json<Value>> {
    let scope = collections::find(&app, &tenant, &collection)?.scope();
    Ok(Json(json!(app.catalog.tables(&scope)?)))
}

/// Where a table is and how far it has come: its Delta location, as every
/// engine opens it, and its current version.
pub async fn show(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, table)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let scope = locate(&app, &tenant, &collection, &table)?;
    let namespace = crate::catalog::iceberg_namespace(&scope);
    let snapshot = snapshot(&app, &tenant, &collection, &table, None).await?;
    let location = app.catalog.store().location(&tables::delta::table_dir(&scope, &table));
    let (task_app, task_table) = (app.clone(), table.clone());
    let partition_by = app.catalog.table_record(&scope, &table)?.map(|r| r.partition_by).unwrap_or_default();
    let log = tokio::task::spawn_blocking(move || tables::delta::lag(&task_app.catalog, &scope, &task_table)).await??;
    let partitions: std::collections::HashSet<_> = snapshot.files.iter().map(|f| &f.partition_values).collect();
    // An Iceberg table also: its current metadata, and its name in the Iceberg catalogs.
    let iceberg = app
        .catalog
        .iceberg_location(&namespace, &table)?
        .map(|metadata| json!({"metadata_location": metadata, "identifier": format!("{namespace}.{table}")}));
    Ok(Json(json!({
        "table": format!("{collection}/{table}"),
        "format": if iceberg.is_some() { "delta+iceberg" } else { "delta" },
        "iceberg": iceberg,
        "location": location,
        "version": snapshot.version,
        "delta_version": snapshot.delta_version,
        "log": log,
        "rows": snapshot.rows,
        "files": snapshot.files.len(),
        "bytes": snapshot.files.iter().map(|f| f.size).sum::<u64>(),
        "partition_by": partition_by,
        "partition_columns": tables::partition::columns_of(&partition_by),
        "partitions": if partition_by.is_empty() { 0 } else { partitions.len() },
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VacuumRequest {
    keep_versions: i64,
}

/// Retention: keeps the last `keep_versions` versions readable, deletes what
/// only older ones read, and compacts old small files (see `tables::vacuum`).
pub async fn vacuum(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, table)): Path<(String, String)>,
    bytes: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    let req: VacuumRequest = super::request::body(&bytes)?;
    if req.keep_versions < 1 {
        return Err(ApiError::invalid("keep_versions must be at least 1: the latest version is always kept"));
    }
    let scope = locate(&app, &tenant, &collection, &table)?;
    let task_app = app.clone();
    let done = tokio::task::spawn_blocking(move || {
        tables::vacuum::vacuum(&task_app.catalog, &scope, &table, req.keep_versions)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    Ok(Json(json!(done)))
}

#[derive(Deserialize)]
pub struct Latest {
    /// Only the last this many versions.
    limit: Option<i64>,
}

/// `GET …/versions?limit=`: the table's versions (the last `limit`), oldest first.
pub async fn versions(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, table)): Path<(String, String)>,
    Query(q): Query<Latest>,
) -> ApiResult<Json<Value>> {
    let scope = locate(&app, &tenant, &collection, &table)?;
    let after = match q.limit {
        Some(n) => app.catalog.version_at(&scope, &table, i64::MAX)?.unwrap_or(0) - n.max(0),
        None => 0,
    };
    Ok(Json(json!(app.catalog.versions_after(&scope, &table, after)?)))
}

pub async fn schema(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, table)): Path<(String, String)>,
    Query(at): Query<At>,
) -> ApiResult<Json<Value>> {
    let snapshot = snapshot(&app, &tenant, &collection, &table, at.version).await?;
    let schema = tokio::task::spawn_blocking(move || tables::schema(app.catalog.store(), &snapshot)).await??;
    let columns: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| json!({ "name": f.name(), "type": f.data_type().to_string(), "nullable": f.is_nullable() }))
        .collect();
    Ok(Json(json!({ "table": format!("{collection}/{table}"), "columns": columns })))
}

pub async fn sample(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, table)): Path<(String, String)>,
    Query(at): Query<At>,
) -> ApiResult<Json<Value>> {
    let snapshot = snapshot(&app, &tenant, &collection, &table, at.version).await?;
    let (version, total) = (snapshot.version, snapshot.rows);
    let (offset, limit) = (at.offset.unwrap_or(0), at.limit.unwrap_or(10).min(10_000));
    let rows =
        tokio::task::spawn_blocking(move || tables::sample(app.catalog.store(), &snapshot, offset, limit)).await??;
    Ok(Json(json!({
        "table": format!("{collection}/{table}"), "version": version, "rows_in_version": total, "offset": offset,
        "rows": rows,
    })))
}

/// The data files a version reads, oldest first, a page at a time (`offset`,
/// `limit`, 1,000 at most): each with its path in the table's directory,
/// size, rows and partition.
pub async fn files(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, table)): Path<(String, String)>,
    Query(at): Query<At>,
) -> ApiResult<Json<Value>> {
    let scope = locate(&app, &tenant, &collection, &table)?;
    let snapshot = snapshot(&app, &tenant, &collection, &table, at.version).await?;
    let dir = format!("{}/", tables::delta::table_dir(&scope, &table));
    let (offset, limit) = (at.offset.unwrap_or(0), at.limit.unwrap_or(100).min(1_000));
    let files: Vec<Value> = snapshot
        .files
        .iter()
        .skip(offset)
        .take(limit)
        .map(|f| {
            let partition: serde_json::Map<String, Value> =
                f.partition_values.iter().map(|(c, v)| (c.clone(), json!(v))).collect();
            json!({
                "path": f.key.strip_prefix(&dir).unwrap_or(&f.key), "size": f.size, "rows": f.rows,
                "partition": partition,
            })
        })
        .collect();
    Ok(Json(json!({
        "table": format!("{collection}/{table}"), "version": snapshot.version, "count": snapshot.files.len(),
        "bytes": snapshot.files.iter().map(|f| f.size).sum::<u64>(), "offset": offset, "files": files,
    })))
}

pub async fn export(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, table)): Path<(String, String)>,
    Query(at): Query<At>,
) -> ApiResult<impl IntoResponse> {
    let snapshot = snapshot(&app, &tenant, &collection, &table, at.version).await?;
    let version = snapshot.version;
    let bytes = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        tables::export(app.catalog.store(), &snapshot, &mut out).map(|_| out)
    })
    .await??;
    let disposition = format!("attachment; filename=\"{table}-v{version}.parquet\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/vnd.apache.parquet".to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        bytes,
    ))
}
