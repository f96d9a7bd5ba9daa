//! Stream publishers: registration (every check the seed names, each a 4xx
//! that says what to do), status, pause/resume/delete, executions; and the
//! workers they run as.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::cluster;
use super::collections::{self, check_broker};
use super::error::{ApiError, ApiResult};
use super::partitioning;
use super::plugins;
use super::request::{body, resolve};
use super::supervisor::WorkerState;
use crate::catalog::{Catalog, Execution, PublisherRecord, Tenant};
use crate::formats::registry::RegistryClient;
use crate::formats::{Format, writers};
use crate::publisher::declaration::table_name_for_topic;
use crate::publisher::source::{KafkaConnection, KafkaSource, SchemaRegistry};
use crate::sources::kafka::{self, CheckError, Watermarks};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Registration {
    /// The declaration (TOML), with its schema inline.
    declaration: String,
    /// The plugin: its digest, `sha256:<hex>`, as `POST /v1/plugins`
    /// answered, or a name it was pushed under (the digest the name has now
    /// is the one registered).
    plugin: String,
    /// Replace a publisher of the same name.
    #[serde(default)]
    update: bool,
}

/// On boot: every table's Delta log gets what the catalog committed (a crash
/// may have come between the two), then every publisher not paused starts.
pub async fn start_all(app: &Arc<App>) {
    let catalog = app.catalog.clone();
    match tokio::task::spawn_blocking(move || crate::tables::delta::sync_all(&catalog)).await {
        Ok(Err(e)) => tracing::error!(error = %format!("{e:#}"), "bringing the Delta logs up to the catalog"),
        Err(e) => tracing::error!(error = %e, "bringing the Delta logs up to the catalog"),
        Ok(Ok(())) => {}
    }
    cluster::reconcile(app).await;
    tracing::info!(publishers = app.supervisor.fingerprints().len(), "publishers started");
}

pub async fn register(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(collection): Path<String>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: Registration = body(&bytes)?;
    let collection = collections::find(&app, &tenant, &collection)?;
    let connection = collections::connection(&collection)?.clone();
    let resolved = resolve(&req.declaration)?;
    let name = resolved.name.clone();
    let existing = app.catalog.publisher(&collection, &name)?;
    if existing.is_some() && !req.update {
        return Err(ApiError::conflict(format!(
            "publisher `{}/{name}` already exists: pass --update (\"update\": true) to replace it",
            collection.name
        )));
    }
    if existing.is_none() {
        let count = app.catalog.tenant_publishers(&tenant)?.len();
        if count >= tenant.quotas.max_publishers as usize {
            return Err(ApiError::forbidden(format!(
                "tenant `{}` already has {count} publishers, its quota: delete one, or ask the admin for a higher max_publishers",
                tenant.name
            )));
        }
    }
    // A table has one writing publisher: a second reading the same topic would write every row again.
    let table = table_name_for_topic(&resolved.source.topic);
    for other in app.catalog.publishers(&collection)?.into_iter().filter(|p| p.name != name) {
        let topic = resolve(&other.declaration)?.source.topic;
        if table_name_for_topic(&topic) == table {
            let c = &collection.name;
            return Err(ApiError::conflict(format!(
                "table `{c}/{table}` is already written by publisher `{c}/{}` (topic `{topic}`), and a second publisher would write every row again: change that one instead (register its declaration, name = \"{}\", with --update), or register this one in another collection",
                other.name, other.name
            )));
        }
    }
    let digest = plugins::resolve(&app, &tenant, &req.plugin)?;
    partitioning::check(&app, &collection, &resolved, &digest).await?;
    let topic = resolved.source.topic.clone();
    check_broker(&app, connection.clone(), Some(topic.clone())).await?;
    let cross_checked = match &connection.schema_registry {
        Some(registry) => Some(cross_check(registry.clone(), resolved.source.clone()).await?),
        None => None,
    };

    app.catalog.put_publisher(&collection, &name, &req.declaration, &digest, req.update)?;
    // The same start as on boot and on every other node: from the record (an
    // updated one restarts; one updated while paused stays paused).
    cluster::reconcile(&app).await;
    let record = app.catalog.publisher(&collection, &name)?.expect("just registered");
    let status = if existing.is_some() { StatusCode::OK } else { StatusCode::CREATED };
    let verb = if existing.is_some() { "updated" } else { "registered" };
    Ok((
        status,
        Json(json!({
            "message": format!(
                "connection check passed and the topic exists; {}publisher {}/{name} {verb}, writing table {}/{}",
                cross_checked.map(|m| format!("{m}; ")).unwrap_or_default(),
                collection.name, collection.name, table_name_for_topic(&topic)
            ),
            "publisher": summary(&app, &record, &HashMap::new(), crate::catalog::now_ms())?,
        })),
    ))
}

/// Registry mode: the declared schema must read what the registry holds for
/// the topic's subject. A 422 that names the field and both types otherwise,
/// or says the registry or the subject is missing.
async fn cross_check(registry: SchemaRegistry, source: KafkaSource) -> ApiResult<String> {
    tokio::task::spawn_blocking(move || {
        let client = RegistryClient::new(&registry).map_err(|e| ApiError::invalid(e.to_string()))?;
        let checked = writers::cross_check_topic(&source.format, &source.key, source.subjects, &client, &source.topic)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        let subjects: Vec<String> =
            checked.iter().map(|v| format!("subject {}, version {}, {}", v.subject, v.version, v.id)).collect();
        Ok(format!("schema cross-checked against the registry ({})", subjects.join("; ")))
    })
    .await?
}

pub(super) fn find(app: &App, tenant: &Tenant, collection: &str, name: &str) -> ApiResult<PublisherRecord> {
    let collection = collections::find(app, tenant, collection)?;
    app.catalog.publisher(&collection, name)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "publisher `{}/{name}` does not exist: `weir publisher list {}` shows the registered ones",
            collection.name, collection.name
        ))
    })
}

fn state(app: &App, record: &PublisherRecord) -> WorkerState {
    if record.paused {
        return WorkerState::Paused;
    }
    app.supervisor.state(&record.key()).unwrap_or(WorkerState::Failed { error: "not running on this node".into() })
}

/// What holds a running worker back, in the words `publisher status` uses
/// (the console's list shows it beside the state); `None` when nothing does.
fn condition(app: &App, key: &str) -> Option<String> {
    if let Some(r) = app.supervisor.retry(key) {
        return Some(format!("retrying: attempt {} of {} failed: {}", r.attempt, r.of, r.error));
    }
    if let Some(t) = app.supervisor.refused(key) {
        return Some(format!("brokers refuse it: {}", t.error));
    }
    if let Some(t) = app.supervisor.unreachable(key) {
        return Some(format!("brokers unreachable: {}", t.error));
    }
    let waiting = app.supervisor.registry(key).and_then(|r| r.waiting);
    waiting.map(|e| format!("waiting for the registry: {e}"))
}

/// The minutes the publishers list charts, and those its messages/s is over.
const ACTIVITY_MINUTES: i64 = 15;
const RATE_MINUTES: i64 = 5;

/// A publisher as the list shows it: its state in `publisher status`'s words,
/// its lag summed over the nodes holding its partitions (`lags`, from their
/// heartbeats), and what its committed batches took in and wrote a minute at
/// a time over the last minutes. Blocking.
fn summary(app: &App, record: &PublisherRecord, lags: &HashMap<String, i64>, now_ms: i64) -> ApiResult<Value> {
    let resolved = resolve(&record.declaration)?;
    let state = state(app, record);
    let condition = match &state {
        WorkerState::Failed { error } => Some(error.clone()),
        WorkerState::Consuming { .. } => condition(app, &record.key()),
        WorkerState::Paused => None,
    };
    let key = record.key();
    let since_ms = now_ms - ACTIVITY_MINUTES * 60_000;
    let mut messages = vec![0u64; ACTIVITY_MINUTES as usize];
    let mut rows = vec![0u64; ACTIVITY_MINUTES as usize];
    let mut recent = 0;
    for (at, taken, written) in app.catalog.committed_since(&key, since_ms)? {
        let minute = (((at - since_ms) / 60_000) as usize).min(ACTIVITY_MINUTES as usize - 1);
        messages[minute] += taken;
        rows[minute] += written;
        if at >= now_ms - RATE_MINUTES * 60_000 {
            recent += taken;
        }
    }
    let last_batch = app.catalog.recent_executions(&key, 1)?.pop();
    Ok(json!({
        "collection": record.collection.name,
        "name": record.name,
        "topic": resolved.source.topic,
        "output_table": format!("{}/{}", record.collection.name, table_name_for_topic(&resolved.source.topic)),
        "plugin": record.plugin,
        "state": state.name(),
        "condition": condition,
        "lag": lags.get(&key),
        "messages_per_s": (recent as f64 / (RATE_MINUTES * 60) as f64 * 10.0).round() / 10.0,
        "activity": { "since_ms": since_ms, "minute_ms": 60_000, "messages": messages, "rows": rows },
        "last_batch": last_batch.map(|e| json!({
            "id": e.id, "status": e.status, "started_at_ms": e.started_at_ms, "rows_out": e.rows_out,
        })),
        "updated_at_ms": record.updated_at_ms,
    }))
}

/// The list's publishers as [`summary`] shows them.
async fn summaries(app: Arc<App>, records: Vec<PublisherRecord>) -> ApiResult<Json<Value>> {
    tokio::task::spawn_blocking(move || {
        let lags = cluster::lags(&app);
        let now_ms = crate::catalog::now_ms();
        let shown = records.iter().map(|r| summary(&app, r, &lags, now_ms)).collect::<ApiResult<Vec<_>>>()?;
        Ok(Json(json!(shown)))
    })
    .await?
}

pub async fn list(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(collection): Path<String>,
) -> ApiResult<Json<Value>> {
    let collection = collections::find(&app, &tenant, &collection)?;
    let records = app.catalog.publishers(&collection)?;
    summaries(app, records).await
}

pub async fn list_all(Caller(tenant): Caller, State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    let records = app.catalog.tenant_publishers(&tenant)?;
    summaries(app, records).await
}

/// How far behind one partition is.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionLag {
    pub partition: i32,
    /// The catalog's next offset (`None`: nothing committed yet).
    pub committed: Option<i64>,
    pub high_watermark: i64,
    pub lag: i64,
}

/// Consumer lag: the topic's high watermarks against the catalog's offsets. Blocking.
fn lag(
    catalog: &Catalog,
    connection: &KafkaConnection,
    topic: &str,
    key: &str,
) -> Result<Vec<PartitionLag>, CheckError> {
    let marks = kafka::check(connection, Some(topic), Duration::from_secs(5))?.partitions.unwrap_or_default();
    Ok(lags(&marks, &catalog.offsets(key, topic).unwrap_or_default()))
}

/// How far each partition's catalog offset (`committed`, else its first
/// offset) is behind its end.
fn lags(marks: &[Watermarks], committed: &BTreeMap<i32, i64>) -> Vec<PartitionLag> {
    marks
        .iter()
        .map(|m| {
            let next = committed.get(&m.partition).copied();
            PartitionLag {
                partition: m.partition,
                committed: next,
                high_watermark: m.high,
                lag: (m.high - next.unwrap_or(m.low)).max(0),
            }
        })
        .collect()
}

/// Measures the lag of every partition this node's workers hold, for the
/// metrics, now and then: from the watermarks their consumers last fetched
/// and the catalog's offsets, asking the brokers nothing (a client per
/// publisher per round cost a 100-publisher node a tenth of a core). A
/// partition another node holds is that node's to report.
pub async fn refresh_lag(app: Arc<App>) {
    let mut every = tokio::time::interval(app.config.lag_interval);
    loop {
        every.tick().await;
        let task_app = app.clone();
        let measured = tokio::task::spawn_blocking(move || {
            let mut by_topic: BTreeMap<(String, String), Vec<Watermarks>> = BTreeMap::new();
            for (publisher, topic, marks) in task_app.supervisor.node().sources.kafka.watermarks() {
                by_topic.entry((publisher, topic)).or_default().push(marks);
            }
            // One look at the catalog for all of them (not one per publisher each round).
            let mut offsets = task_app.catalog.all_offsets()?;
            Ok::<_, crate::catalog::CatalogError>(
                by_topic
                    .into_iter()
                    .flat_map(|(key, marks)| {
                        let committed = offsets.remove(&key).unwrap_or_default();
                        let publisher = key.0;
                        lags(&marks, &committed).into_iter().map(move |p| (publisher.clone(), p.partition, p.lag))
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await;
        match measured {
            Ok(Ok(measured)) => app.supervisor.set_lags(&measured),
            Ok(Err(e)) => tracing::warn!(error = %e, "reading the offsets for the lag (retried at the next round)"),
            Err(_) => {}
        }
    }
}

/// An execution as the tenant sees it: the publisher without the tenant prefix.
fn execution_view(tenant: &Tenant, mut e: Execution) -> Execution {
    if let Some(rest) = e.publisher.strip_prefix(&format!("{}/", tenant.name)) {
        e.publisher = rest.to_string();
    }
    e
}

/// What the seed shows: topic, format, output table, flush ceiling, effective
/// time window, worker state, lag, the last batch.
pub async fn status(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    let resolved = resolve(&record.declaration)?;
    let source = &resolved.source;
    let rollover = source.config.rollover(resolved.flush_interval_mins);
    let last = app.catalog.recent_executions(&record.key(), 1)?.pop().map(|e| execution_view(&tenant, e));
    let registry = app.supervisor.registry(&record.key());
    let lag = match record.collection.connection.clone() {
        Some(connection) => {
            let (task_app, topic, key) = (app.clone(), source.topic.clone(), record.key());
            tokio::task::spawn_blocking(move || lag(&task_app.catalog, &connection, &topic, &key))
                .await?
                .map_err(|e| e.to_string())
        }
        None => Err("the collection has no connection".to_string()),
    };
    // Versions committed that no reader of the table sees yet (its Delta log is behind).
    let table_log = {
        let (task_app, scope, table) = (app.clone(), record.collection.scope(), table_name_for_topic(&source.topic));
        tokio::task::spawn_blocking(move || crate::tables::delta::lag(&task_app.catalog, &scope, &table)).await??
    };
    let unreachable = app.supervisor.unreachable(&record.key());
    // The worker cannot reach its brokers: whatever a check from here says, its lag is not known.
    let lag = match &unreachable {
        Some(trouble) => Err(format!("unknown: the worker cannot reach its brokers ({})", trouble.error)),
        None => lag,
    };
    let (lag_total, lag_error) = match &lag {
        Ok(partitions) => (Some(partitions.iter().map(|p| p.lag).sum::<i64>()), None),
        Err(e) => (None, Some(e.clone())),
    };
    // Where a new publisher starts, until it has committed somewhere.
    let start_from = match app.catalog.offsets(&record.key(), &source.topic)?.is_empty() {
        true => Some(source.config.start_from.describe()),
        false => None,
    };
    Ok(Json(json!({
        "collection": record.collection.name,
        "name": record.name,
        "topic": source.topic,
        "data_format": source.format.data_format(),
        "message": match &source.format { Format::Protobuf(p) => Some(p.message.full_name().to_string()), _ => None },
        "schema_registry": record.collection.connection.as_ref().and_then(|c| c.schema_registry.as_ref()).map(|r| json!({
            "kind": r.kind,
            "url": r.location(),
            "subject": writers::subject_of(source.subjects, &source.format, &source.topic, false).ok(),
            "subject_name_strategy": source.subjects.as_str(),
            "waiting": registry.as_ref().and_then(|v| v.waiting.clone()),
            "waiting_since_ms": registry.as_ref().and_then(|v| v.waiting_since_ms),
            "schema_ids": registry.as_ref().map(|v| v.schema_ids.iter().map(|(id, usable)| json!({"id": id, "usable": usable})).collect::<Vec<_>>()).unwrap_or_default(),
        })),
        "key_format": source.key.name(),
        "include_headers": source.headers,
        "start_from": start_from,
        "dead_letter_topic": source.dead_letter_topic,
        "output_table": format!("{}/{}", record.collection.name, table_name_for_topic(&source.topic)),
        "table_log": table_log,
        "plugin": record.plugin,
        "declaration": record.declaration,
        "flush_interval_mins": resolved.flush_interval_mins,
        "flush_ceiling_seconds": resolved.flush_interval_mins * 60,
        "time_window_seconds": rollover.time.as_secs(),
        "size_rollover_bytes": rollover.size_bytes,
        "messages_rollover": rollover.messages,
        "worker": state(&app, &record),
        "nodes": cluster::view(&app, &record.key()),
        "retrying": app.supervisor.retry(&record.key()),
        "broker_refused": app.supervisor.refused(&record.key()),
        "broker_unreachable": unreachable,
        "lag": lag_total,
        "lag_partitions": lag.as_ref().ok(),
        "lag_error": lag_error,
        "last_batch": last,
    })))
}

pub async fn pause(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    app.catalog.set_paused(&record, true)?;
    // Graceful: the open batch is committed within the shutdown deadline, or re-read on
    // resume. Here now; on the other nodes at their next poll.
    cluster::reconcile(&app).await;
    Ok(Json(json!({ "publisher": format!("{collection}/{name}"), "state": "paused" })))
}

pub async fn resume(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    // A failed worker restarts too: resuming is a new registration time.
    app.catalog.set_paused(&record, false)?;
    cluster::reconcile(&app).await;
    let record = find(&app, &tenant, &collection, &name)?;
    Ok(Json(json!({ "publisher": format!("{collection}/{name}"), "state": state(&app, &record).name() })))
}

pub async fn delete(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    app.catalog.delete_publisher(&record)?;
    cluster::reconcile(&app).await;
    Ok(Json(json!({ "deleted": format!("{collection}/{name}") })))
}

#[derive(Deserialize)]
pub struct Limit {
    limit: Option<u32>,
}

pub async fn executions(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path((collection, name)): Path<(String, String)>,
    Query(q): Query<Limit>,
) -> ApiResult<Json<Value>> {
    let record = find(&app, &tenant, &collection, &name)?;
    let list = app.catalog.recent_executions(&record.key(), q.limit.unwrap_or(20))?;
    Ok(Json(json!(list.into_iter().map(|e| execution_view(&tenant, e)).collect::<Vec<_>>())))
}

pub async fn execution(
    Caller(tenant): Caller,
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
) -> ApiResult<Json<Value>> {
    let prefix = format!("{}/", tenant.name);
    match app.catalog.execution(id)? {
        Some(e) if e.publisher.starts_with(&prefix) => Ok(Json(json!(execution_view(&tenant, e)))),
        _ => Err(ApiError::not_found(format!("execution {id} does not exist"))),
    }
}
