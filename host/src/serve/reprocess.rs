//! `POST /v1/collections/{c}/publishers/{p}/reprocess`: a publisher runs
//! again over what it ingested after a version, with its plugin or a fixed
//! one. The catalog removes those rows and moves the offsets back in one
//! transaction (`catalog::reprocess`); the table's Delta log then says so to
//! every engine, and every node's worker restarts from the moved offsets.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::cluster;
use super::error::{ApiError, ApiResult};
use super::plugins;
use super::publishers::find;
use super::request::{body, resolve};
use crate::catalog::{ReprocessError, ReprocessPlan};
use crate::publisher::declaration::table_name_for_topic;
use crate::publisher::source::KafkaConnection;
use crate::sources::kafka;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reprocess {
    /// The version whose rows stay: every row committed after it is read again.
    from_version: i64,
    /// A plugin to read them with instead (a digest or a pushed name).
    plugin: Option<String>,
}

pub async fn reprocess(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let req: Reprocess = body(&bytes)?;
    let record = find(&app, &tenant, &collection, &name)?;
    let resolved = resolve(&record.declaration)?;
    let (scope, key, topic) = (record.collection.scope(), record.key(), resolved.source.topic.clone());
    let table = table_name_for_topic(&topic);
    let plugin = req.plugin.as_deref().map(|p| plugins::resolve(&app, &tenant, p)).transpose()?;
    let connection = record
        .collection
        .connection
        .clone()
        .ok_or_else(|| ApiError::conflict(format!("collection `{collection}` has no connection to read from")))?;
    let refused = |e: ReprocessError| match e {
        ReprocessError::NoVersion { .. } => ApiError::not_found(e.to_string()),
        e => ApiError::conflict(e.to_string()),
    };
    for attempt in 1.. {
        let plan = app.catalog.reprocess_plan(&scope, &table, &key, req.from_version)?.map_err(refused)?;
        retained(connection.clone(), topic.clone(), &plan).await?;
        let committed =
            app.catalog.commit_reprocess(&scope, &table, record.id, &key, &topic, &plan, plugin.as_deref())?;
        match committed {
            Ok(version) => {
                let (catalog, sync_scope, sync_table) = (app.catalog.clone(), scope.clone(), table.clone());
                let logged = tokio::task::spawn_blocking(move || {
                    crate::tables::delta::sync(&catalog, &sync_scope, &sync_table)?;
                    // An Iceberg table's metadata follows too (it removes the same files).
                    crate::tables::iceberg::sync(&catalog, &sync_scope, &sync_table).map(drop)
                })
                .await?;
                if let Err(e) = logged {
                    // Written by the next sync; status says the log is behind meanwhile.
                    tracing::warn!(table = %table, error = %e, "the reprocess's version is not in the Delta log yet");
                }
                cluster::reconcile(&app).await;
                return Ok(Json(json!({
                    "message": format!(
                        "version {version} of {collection}/{table} removes the {} rows of versions {}; {collection}/{name} reads {} again from {}",
                        plan.removed_rows,
                        span(&plan.removed_versions),
                        topic,
                        offsets(&plan),
                    ),
                    "version": version,
                    "plan": plan,
                })));
            }
            Err(ReprocessError::Moved { .. }) if attempt < 5 => continue,
            Err(e) => return Err(refused(e)),
        }
    }
    unreachable!("the loop returns")
}

/// Refuses a reprocess the brokers can no longer serve: a partition whose
/// offset to read from is before the earliest the broker still keeps.
async fn retained(connection: KafkaConnection, topic: String, plan: &ReprocessPlan) -> ApiResult<()> {
    let checked = tokio::task::spawn_blocking(move || kafka::check(&connection, Some(&topic), Duration::from_secs(10)))
        .await?
        .map_err(|e| ApiError::conflict(e.to_string()))?;
    let gone: Vec<String> = checked
        .partitions
        .unwrap_or_default()
        .iter()
        .filter_map(|w| {
            let from = *plan.offsets.get(&w.partition)?;
            (from < w.low).then(|| format!("partition {} from offset {from} (its earliest is {})", w.partition, w.low))
        })
        .collect();
    if gone.is_empty() {
        return Ok(());
    }
    Err(ApiError::conflict(format!(
        "the brokers no longer keep what version {} left unread: {}. Reprocess from a later version, or restore the topic's data",
        plan.from_version,
        gone.join(", ")
    )))
}

fn span(versions: &[i64]) -> String {
    match (versions.first(), versions.last()) {
        (Some(a), Some(b)) if a != b => format!("{a} to {b}"),
        (Some(a), _) => a.to_string(),
        _ => "none".into(),
    }
}

fn offsets(plan: &ReprocessPlan) -> String {
    let each: Vec<String> = plan.offsets.iter().map(|(p, o)| format!("partition {p} at {o}")).collect();
    each.join(", ")
}
