//! Several `weir serve` nodes on one catalog are one cluster: Kafka's
//! consumer group splits each publisher's partitions between the nodes'
//! workers, and the catalog's compare-and-set keeps every range committed
//! once. This module keeps each node's workers in step with the catalog's
//! publishers and tells the cluster what each node runs.
//!
//! Every poll a node reconciles (a publisher registered, updated or resumed
//! on any node starts here; one paused or deleted stops here) and records a
//! heartbeat: each worker's state and partitions. A node that stops cleanly
//! leaves; one whose heartbeat is older than a few polls is shown as silent.
//! A node alone (the embedded default) runs the same loop.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::App;
use super::metrics::ClusterNode;
use super::supervisor::{Holding, WorkerState};
use super::workers;
use crate::catalog::{NodeRecord, PublisherRecord, now_ms};

/// This node, as the cluster knows it.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `<host name>:<port>`: a node restarted on the same port takes its place back.
    pub id: String,
    /// Its API's URL.
    pub address: String,
    pub started_at_ms: i64,
}

impl Identity {
    pub fn new(address: &str, port: u16) -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = if host.trim().is_empty() { "localhost" } else { host.trim() };
        Self { id: format!("{host}:{port}"), address: address.to_string(), started_at_ms: now_ms() }
    }
}

/// How many polls without a heartbeat make a node silent.
const SILENT_AFTER_POLLS: u32 = 3;

/// What a publisher's worker is started from: when a node sees this change
/// (a new declaration, plugin or connection, a resume), it restarts the worker.
pub fn fingerprint(record: &PublisherRecord) -> String {
    let connection = serde_json::to_vec(&record.collection.connection).expect("json");
    let digest = Sha256::new()
        .chain_update(record.declaration.as_bytes())
        .chain_update([0])
        .chain_update(record.plugin.as_bytes())
        .chain_update([0])
        .chain_update(record.updated_at_ms.to_le_bytes())
        .chain_update(&connection)
        .finalize();
    hex::encode(&digest[..16])
}

/// Brings this node's workers to the catalog's publishers: starts those not
/// paused that it does not run (or runs from an older registration), stops
/// those paused or deleted. One reconcile at a time per node.
pub async fn reconcile(app: &Arc<App>) {
    let _one_at_a_time = app.control.lock().await;
    let catalog = app.catalog.clone();
    let records = match tokio::task::spawn_blocking(move || catalog.all_publishers()).await {
        Ok(Ok(records)) => records,
        Ok(Err(e)) => return tracing::warn!(error = %e, "reading the publishers (retried at the next poll)"),
        Err(e) => return tracing::warn!(error = %e, "reading the publishers"),
    };
    let running = app.supervisor.fingerprints();
    let wanted: HashMap<String, &PublisherRecord> =
        records.iter().filter(|r| !r.paused).map(|r| (r.key(), r)).collect();
    for key in running.keys().filter(|k| !wanted.contains_key(*k)) {
        tracing::info!(publisher = %key, "paused or deleted: stopping its worker");
        app.supervisor.stop(key).await;
    }
    for (key, record) in wanted {
        let fingerprint = fingerprint(record);
        match running.get(&key) {
            Some(current) if *current == fingerprint => {}
            Some(_) => {
                app.supervisor.stop(&key).await;
                workers::start(app, record, fingerprint).await;
            }
            None => workers::start(app, record, fingerprint).await,
        }
    }
}

/// Records this node's heartbeat with what it runs.
async fn heartbeat(app: &Arc<App>, me: &Identity) {
    let node = NodeRecord {
        id: me.id.clone(),
        address: me.address.clone(),
        started_at_ms: me.started_at_ms,
        heartbeat_ms: now_ms(),
        holdings: json!(app.supervisor.holdings()),
    };
    let catalog = app.catalog.clone();
    if let Ok(Err(e)) = tokio::task::spawn_blocking(move || catalog.heartbeat(&node)).await {
        tracing::warn!(error = %e, "recording this node's heartbeat (retried at the next poll)");
    }
}

/// Every poll: reconcile, then a heartbeat. Runs until the server stops.
pub async fn run(app: Arc<App>, me: Identity) {
    let mut every = tokio::time::interval(app.config.cluster_poll);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        reconcile(&app).await;
        heartbeat(&app, &me).await;
    }
}

/// A clean stop: the node leaves the cluster's view.
pub async fn leave(app: &Arc<App>, me: &Identity) {
    let (catalog, id) = (app.catalog.clone(), me.id.clone());
    let _ = tokio::task::spawn_blocking(move || catalog.remove_node(&id)).await;
}

/// A node the catalog heard from in the last day, and whether it is live.
struct Heard {
    record: NodeRecord,
    live: bool,
    age_ms: i64,
}

/// Every node that sent a heartbeat in the last day, by id; a node whose last
/// one is older than a few polls (at least 5 s) is silent.
fn heard(app: &App) -> Vec<Heard> {
    let silent_after = (app.config.cluster_poll * SILENT_AFTER_POLLS).max(Duration::from_secs(5));
    let now = now_ms();
    let nodes = match app.catalog.nodes(now - 86_400_000) {
        Ok(nodes) => nodes,
        Err(e) => {
            tracing::warn!(error = %e, "reading the cluster's nodes");
            return Vec::new();
        }
    };
    nodes
        .into_iter()
        .map(|record| {
            let age_ms = now - record.heartbeat_ms;
            Heard { live: age_ms <= silent_after.as_millis() as i64, age_ms, record }
        })
        .collect()
}

/// What each node last said it runs, by publisher key.
fn holdings(node: &NodeRecord) -> HashMap<String, Holding> {
    serde_json::from_value(node.holdings.clone()).unwrap_or_default()
}

/// Which nodes run `key`'s worker and what each holds; silent nodes too,
/// with what they last said. For `publisher status`. Blocking.
pub fn view(app: &App, key: &str) -> Value {
    let shown: Vec<Value> = heard(app)
        .into_iter()
        .filter_map(|n| {
            let holding = holdings(&n.record).remove(key)?;
            let mut view = json!({
                "node": n.record.id,
                "address": n.record.address,
                "live": n.live,
                "heartbeat_age_ms": n.age_ms,
            });
            if let (Value::Object(view), Value::Object(state)) = (&mut view, json!(holding)) {
                view.extend(state);
            }
            Some(view)
        })
        .collect();
    json!(shown)
}

/// Each publisher's lag summed over the live nodes' last heartbeats, each
/// node's over the partitions it holds; a publisher no node has measured yet
/// is absent. Blocking.
pub fn lags(app: &App) -> HashMap<String, i64> {
    let mut lags = HashMap::new();
    for node in heard(app).into_iter().filter(|n| n.live) {
        for (key, holding) in holdings(&node.record) {
            if let Some(lag) = holding.lag {
                *lags.entry(key).or_default() += lag;
            }
        }
    }
    lags
}

/// The cluster's nodes for `/metrics`. Blocking.
pub fn metrics(app: &App) -> Vec<ClusterNode> {
    heard(app)
        .into_iter()
        .map(|n| {
            let partitions = holdings(&n.record)
                .into_iter()
                .map(|(key, holding)| match holding.state {
                    WorkerState::Consuming { partitions } => (key, partitions.len() as i64),
                    _ => (key, 0),
                })
                .collect();
            ClusterNode { id: n.record.id, live: n.live, heartbeat_age_secs: n.age_ms as f64 / 1000.0, partitions }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A heartbeat carries each worker's lag beside its state, and a node
    /// reads the heartbeats of nodes that did not carry it yet.
    #[test]
    fn a_holding_is_its_state_and_its_lag() {
        let holding = Holding { state: WorkerState::Consuming { partitions: vec![0, 2] }, lag: Some(7) };
        let written = json!({ "events/p": holding });
        assert_eq!(written, json!({"events/p": {"state": "consuming", "partitions": [0, 2], "lag": 7}}));
        let node = |holdings| NodeRecord {
            id: "n".into(),
            address: "http://n".into(),
            started_at_ms: 0,
            heartbeat_ms: 0,
            holdings,
        };
        assert_eq!(holdings(&node(written))["events/p"], holding);
        let older = node(json!({"events/p": {"state": "failed", "error": "e"}}));
        assert_eq!(
            holdings(&older)["events/p"],
            Holding { state: WorkerState::Failed { error: "e".into() }, lag: None }
        );
    }
}
