//! A registered publisher's worker: built from its catalog record (the
//! declaration, the collection's connection, the tenant's limits, the stored
//! plugin) and started under the supervisor. `cluster` decides which workers
//! a node runs; this starts one.

use std::sync::Arc;
use std::time::Duration;

use super::App;
use super::collections;
use super::metrics::PublisherLabels;
use super::plugins;
use super::request::resolve;
use crate::catalog::{Collection, PublisherRecord, Tenant};
use crate::plugin::Limits;
use crate::publisher::StreamPublisher;
use crate::publisher::declaration::Resolved;

pub(super) fn labels(record: &PublisherRecord) -> PublisherLabels {
    PublisherLabels {
        tenant: record.collection.tenant.clone(),
        collection: record.collection.name.clone(),
        publisher: record.name.clone(),
    }
}

fn limits(tenant: &Tenant) -> Limits {
    Limits {
        memory_bytes: tenant.quotas.memory_limit_bytes,
        deadline: Duration::from_millis(tenant.quotas.deadline_ms),
        ..Limits::default()
    }
}

/// Builds a registered publisher's worker input (blocking: loads the plugin).
pub(super) fn build(app: &App, record: &PublisherRecord) -> anyhow::Result<StreamPublisher> {
    let resolved = resolve(&record.declaration).map_err(|e| anyhow::anyhow!(e.message))?;
    publisher(app, &record.collection, resolved, &record.plugin)
}

/// A publisher of `collection` declared as `resolved`, with the plugin of
/// digest `plugin` (blocking: loads the plugin).
pub(super) fn publisher(
    app: &App,
    collection: &Collection,
    resolved: Resolved,
    plugin: &str,
) -> anyhow::Result<StreamPublisher> {
    let tenant = app.catalog.tenant(&collection.tenant)?.ok_or_else(|| anyhow::anyhow!("the tenant is gone"))?;
    let connection = collections::connection(collection).map_err(|e| anyhow::anyhow!(e.message))?.clone();
    Ok(StreamPublisher {
        collection: collection.scope(),
        name: resolved.name,
        connection,
        source: resolved.source,
        flush_interval_mins: resolved.flush_interval_mins,
        plugin: plugins::load(app, plugin)?,
        limits: limits(&tenant),
        partitioning: resolved.partitioning,
        table_format: collection.table_format_of(resolved.table_format),
    })
}

/// Starts a registered publisher's worker, or records why it cannot start
/// (`fingerprint`: what it is started from, see `cluster::fingerprint`).
pub(super) async fn start(app: &Arc<App>, record: &PublisherRecord, fingerprint: String) {
    let (task_app, task_record) = (app.clone(), record.clone());
    let built = tokio::task::spawn_blocking(move || build(&task_app, &task_record)).await;
    match built {
        Ok(Ok(publisher)) => app.supervisor.start(record.key(), labels(record), publisher, fingerprint),
        Ok(Err(e)) => app.supervisor.failed(record.key(), labels(record), format!("{e:#}"), fingerprint),
        Err(e) => app.supervisor.failed(record.key(), labels(record), e.to_string(), fingerprint),
    }
}
