//! An Iceberg REST catalog over weir's Iceberg tables, read-only, under
//! `/iceberg` (the URI a client is given: `http(s)://HOST:PORT/iceberg`).
//! A tenant's token sees its own collections as namespaces
//! `[tenant, collection]` (`tenant.collection`, as in the SQL catalog) and
//! their Iceberg tables; loading one answers its current metadata and where
//! that is. Errors are in the REST catalog's own shape, so clients raise
//! their own exceptions (no such table, not authorized …).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::error::ApiError;
use crate::catalog::{Tenant, iceberg_namespace};

pub fn router() -> Router<Arc<App>> {
    Router::new()
        .route("/iceberg/v1/config", get(config))
        .route("/iceberg/v1/namespaces", get(namespaces).post(read_only))
        .route("/iceberg/v1/namespaces/{namespace}", get(namespace).delete(read_only).head(namespace))
        .route("/iceberg/v1/namespaces/{namespace}/tables", get(tables).post(read_only))
        .route(
            "/iceberg/v1/namespaces/{namespace}/tables/{table}",
            get(load).head(load).post(read_only).delete(read_only),
        )
}

/// An error as the REST catalog's clients read one.
struct IcebergError(ApiError);

impl IntoResponse for IcebergError {
    fn into_response(self) -> Response {
        let kind = match self.0.status {
            StatusCode::NOT_FOUND => "NoSuchTableException",
            StatusCode::UNAUTHORIZED => "NotAuthorizedException",
            StatusCode::FORBIDDEN => "ForbiddenException",
            StatusCode::METHOD_NOT_ALLOWED => "BadRequestException",
            _ => "ServiceFailureException",
        };
        let body = json!({"error": {"message": self.0.message, "type": kind, "code": self.0.status.as_u16()}});
        (self.0.status, Json(body)).into_response()
    }
}

impl<E: Into<ApiError>> From<E> for IcebergError {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

type Answer = Result<Json<Value>, IcebergError>;

fn caller(caller: Result<Caller, ApiError>) -> Result<Tenant, IcebergError> {
    Ok(caller?.0)
}

async fn config(who: Result<Caller, ApiError>) -> Answer {
    caller(who)?;
    Ok(Json(json!({"defaults": {}, "overrides": {}})))
}

async fn read_only() -> IcebergError {
    IcebergError(ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        message: "weir's Iceberg catalog is read-only: weir's publishers write its tables".into(),
    })
}

/// The tenant's collection a namespace names (`tenant␟collection`, or `tenant.collection`).
fn collection(app: &App, tenant: &Tenant, namespace: &str) -> Result<String, IcebergError> {
    let parts: Vec<&str> = namespace.split(['\u{1f}', '.']).collect();
    let missing = || {
        IcebergError(ApiError::not_found(format!(
            "namespace `{}` does not exist: a tenant's namespaces are its collections, `{}.<collection>`",
            parts.join("."),
            tenant.name
        )))
    };
    let [owner, name] = parts.as_slice() else { return Err(missing()) };
    if *owner != tenant.name {
        return Err(missing());
    }
    let found = app.catalog.collection(tenant, name)?.ok_or_else(missing)?;
    Ok(found.scope())
}

/// The Iceberg tables of a collection (`scope`).
fn iceberg_tables(app: &App, scope: &str) -> Result<Vec<String>, IcebergError> {
    let namespace = iceberg_namespace(scope);
    let mut names = Vec::new();
    for table in app.catalog.tables(scope)? {
        if app.catalog.iceberg_location(&namespace, &table.name)?.is_some() {
            names.push(table.name);
        }
    }
    Ok(names)
}

#[derive(Deserialize)]
struct Parent {
    parent: Option<String>,
}

async fn namespaces(who: Result<Caller, ApiError>, State(app): State<Arc<App>>, Query(q): Query<Parent>) -> Answer {
    let tenant = caller(who)?;
    let all: Vec<Value> = app.catalog.collections(&tenant)?.iter().map(|c| json!([c.tenant, c.name])).collect();
    let listed = match q.parent.as_deref() {
        // Under the tenant: its collections; under a collection: nothing deeper.
        Some(parent) if parent == tenant.name => all,
        Some(_) => Vec::new(),
        None => all,
    };
    Ok(Json(json!({"namespaces": listed})))
}

async fn namespace(
    who: Result<Caller, ApiError>,
    State(app): State<Arc<App>>,
    Path(namespace): Path<String>,
) -> Answer {
    let tenant = caller(who)?;
    let scope = collection(&app, &tenant, &namespace)?;
    let (owner, name) = scope.split_once('/').unwrap_or_default();
    Ok(Json(json!({"namespace": [owner, name], "properties": {}})))
}

async fn tables(who: Result<Caller, ApiError>, State(app): State<Arc<App>>, Path(namespace): Path<String>) -> Answer {
    let tenant = caller(who)?;
    let scope = collection(&app, &tenant, &namespace)?;
    let (owner, name) = scope.split_once('/').unwrap_or_default();
    let identifiers: Vec<Value> =
        iceberg_tables(&app, &scope)?.into_iter().map(|t| json!({"namespace": [owner, name], "name": t})).collect();
    Ok(Json(json!({"identifiers": identifiers})))
}

/// A table's current metadata, and where it is.
async fn load(
    who: Result<Caller, ApiError>,
    State(app): State<Arc<App>>,
    Path((namespace, table)): Path<(String, String)>,
) -> Answer {
    let tenant = caller(who)?;
    let scope = collection(&app, &tenant, &namespace)?;
    let Some(location) = app.catalog.iceberg_location(&iceberg_namespace(&scope), &table)? else {
        return Err(IcebergError(ApiError::not_found(format!(
            "table `{}.{table}` is not an Iceberg table (yet): its publisher's declaration sets table_format = \"iceberg\", and its first commit makes it one",
            iceberg_namespace(&scope)
        ))));
    };
    let metadata = tokio::task::spawn_blocking(move || {
        crate::tables::iceberg::metadata(&app.catalog, &scope, &table, &location).map(|m| (m, location))
    })
    .await
    .map_err(ApiError::from)?;
    let (metadata, location) = metadata?;
    Ok(Json(json!({"metadata-location": location, "metadata": metadata, "config": {}})))
}
