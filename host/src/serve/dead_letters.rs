//! A publisher's dead letters kept in the catalog: found by execution, time
//! and reason, each with its original bytes (base64), its text where it is
//! UTF-8, and why it could not be decoded; and re-run, once the cause is fixed.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use base64::prelude::{BASE64_STANDARD, Engine as _};
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::publishers::find;
use super::workers::build;
use crate::catalog::{DeadLetterFilter, StoredDeadLetter};
use crate::stream::rerun::RerunError;

/// One dead letter as the API shows it.
fn view(d: &StoredDeadLetter) -> Value {
    let bytes = |b: &Option<Vec<u8>>| b.as_ref().map(|b| BASE64_STANDARD.encode(b));
    let text = |b: &Option<Vec<u8>>| b.as_ref().and_then(|b| std::str::from_utf8(b).ok().map(str::to_string));
    let headers: Vec<Value> = d
        .headers
        .iter()
        .map(|(key, value)| json!({ "key": key, "value_base64": bytes(value), "value_text": text(value) }))
        .collect();
    json!({
        "topic": d.topic,
        "partition": d.partition,
        "offset": d.offset,
        "timestamp_ms": d.timestamp,
        "execution": d.execution,
        "at_ms": d.at_ms,
        "error": d.error,
        "key_base64": bytes(&d.key),
        "key_text": text(&d.key),
        "value_base64": bytes(&d.value),
        "value_text": text(&d.value),
        "headers": headers,
    })
}

/// `GET …/publishers/{p}/dead-letters?execution=&since_ms=&until_ms=&reason=&partition=&offset=&limit=`
pub async fn list(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
    Query(filter): Query<DeadLetterFilter>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    let task_app = app.clone();
    let found =
        tokio::task::spawn_blocking(move || task_app.catalog.find_dead_letters(&record.key(), &filter)).await??;
    Ok(Json(json!(found.iter().map(view).collect::<Vec<_>>())))
}

/// `GET …/publishers/{p}/dead-letters/{partition}/{offset}`
pub async fn show(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name, partition, offset)): Path<(String, String, i32, i64)>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    let filter = DeadLetterFilter { partition: Some(partition), offset: Some(offset), ..DeadLetterFilter::default() };
    let found = app.catalog.find_dead_letters(&record.key(), &filter)?;
    match found.first() {
        Some(d) => Ok(Json(view(d))),
        None => Err(ApiError::not_found(format!(
            "publisher `{collection}/{name}` has no dead letter at partition {partition}, offset {offset}: `weir dead-letters list {collection}/{name}` shows those it has"
        ))),
    }
}

/// `POST …/publishers/{p}/dead-letters/rerun?<the list's filters>`: the
/// chosen letters through the publisher's current declaration and plugin, as
/// one new table version (see [`crate::stream::rerun`]).
pub async fn rerun(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
    Query(filter): Query<DeadLetterFilter>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    let (task_app, task_record) = (app.clone(), record.clone());
    let (publisher, letters) = tokio::task::spawn_blocking(move || -> ApiResult<_> {
        let letters = task_app.catalog.find_dead_letters(&task_record.key(), &filter)?;
        let publisher = build(&task_app, &task_record)
            .map_err(|e| ApiError::invalid(format!("publisher `{collection}/{name}` cannot run: {e:#}")))?;
        Ok((publisher, letters))
    })
    .await??;
    if letters.is_empty() {
        return Err(ApiError::not_found(format!(
            "publisher `{}/{}` keeps no dead letters that match: `weir dead-letters list` shows those it keeps",
            record.collection.name, record.name
        )));
    }
    let done = crate::stream::rerun::rerun(&app.catalog, &app.runtime, &publisher, &record.key(), letters).await;
    match done {
        Ok(report) => Ok(Json(json!(report))),
        Err(RerunError::Gone(e)) => Err(ApiError::conflict(e.to_string())),
        Err(e @ RerunError::Plugin(_)) => Err(ApiError::invalid(e.to_string())),
        Err(RerunError::Other(e)) => Err(e.into()),
    }
}
