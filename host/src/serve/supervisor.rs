//! The stream workers of a `weir serve` node: one task per running
//! publisher, its state as people see it, its events turned into metrics.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::metrics::{Metrics, PublisherLabels};
use crate::formats::writers::RegistryEvent;
use crate::publisher::StreamPublisher;
use crate::stream::worker;
use crate::stream::{Node, WorkerEvent, WorkerExit, WorkerOptions};

/// What a registry-mode worker last heard from its schema registry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RegistryView {
    /// Set while the registry cannot be reached: its error. Messages wait meanwhile.
    pub waiting: Option<String>,
    /// When the wait began (ms since the epoch).
    pub waiting_since_ms: Option<i64>,
    /// The writer schema ids fetched, and whether their messages decode (false: they are dead letters).
    pub schema_ids: std::collections::BTreeMap<crate::formats::registry::SchemaId, bool>,
}

/// A batch being retried: its last failed attempt, and when the next runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetryView {
    pub attempt: u32,
    pub of: u32,
    /// The last attempt's error, as the sandbox or the host gave it.
    pub error: String,
    /// When the next attempt runs (ms since the epoch); `None` after the last.
    pub next_attempt_at_ms: Option<i64>,
    /// When the batch's first attempt failed.
    pub failing_since_ms: i64,
}

/// The brokers refusing a worker's client, or out of its reach: what
/// librdkafka said, since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerTrouble {
    pub error: String,
    pub since_ms: i64,
}

/// What is wrong between a worker and its brokers, if anything.
#[derive(Debug, Clone, Default)]
struct Brokers {
    refused: Option<BrokerTrouble>,
    unreachable: Option<BrokerTrouble>,
}

/// Keeps the first `since_ms` of a trouble that goes on, with its latest error.
fn still(trouble: &mut Option<BrokerTrouble>, error: &str) {
    let since_ms = trouble.as_ref().map_or_else(crate::catalog::now_ms, |t| t.since_ms);
    *trouble = Some(BrokerTrouble { error: error.to_string(), since_ms });
}

/// What a node's worker of a publisher is doing, and how far behind its
/// partitions are: what the node's heartbeat tells the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Holding {
    #[serde(flatten)]
    pub state: WorkerState,
    /// Messages behind in the partitions it holds (`None`: not measured yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<i64>,
}

/// What a publisher's worker is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum WorkerState {
    /// Subscribed; `partitions` are the ones this node owns.
    Consuming {
        partitions: Vec<i32>,
    },
    Paused,
    /// Stopped after its retries, or could not start; `resume` restarts it.
    Failed {
        error: String,
    },
}

impl WorkerState {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Consuming { .. } => "consuming",
            Self::Paused => "paused",
            Self::Failed { .. } => "failed",
        }
    }
}

struct Running {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    state: Arc<Mutex<WorkerState>>,
    registry: Arc<Mutex<RegistryView>>,
    retry: Arc<Mutex<Option<RetryView>>>,
    brokers: Arc<Mutex<Brokers>>,
    labels: PublisherLabels,
    /// The summed lag of the partitions it holds, as `refresh_lag` last measured it.
    lag: Option<i64>,
    /// What it was started from (see `cluster::fingerprint`): a registration
    /// that changes it restarts the worker.
    fingerprint: String,
}

pub struct Supervisor {
    node: Node,
    options: WorkerOptions,
    metrics: Arc<Metrics>,
    workers: Mutex<HashMap<String, Running>>,
}

impl Supervisor {
    pub fn new(node: Node, options: WorkerOptions, metrics: Arc<Metrics>) -> Self {
        Self { node, options, metrics, workers: Mutex::default() }
    }

    fn workers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.workers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts `publisher`'s worker under `key` (the caller stops any earlier one first).
    pub fn start(&self, key: String, labels: PublisherLabels, publisher: StreamPublisher, fingerprint: String) {
        let state = Arc::new(Mutex::new(WorkerState::Consuming { partitions: vec![] }));
        let registry = Arc::new(Mutex::new(RegistryView::default()));
        let (stop, shutdown) = watch::channel(false);
        let (events_tx, mut events) = mpsc::unbounded_channel::<WorkerEvent>();
        let (metrics, task_state, task_labels) = (self.metrics.clone(), state.clone(), labels.clone());
        let task_registry = registry.clone();
        let retry = Arc::new(Mutex::new(None));
        let task_retry = retry.clone();
        let brokers: Arc<Mutex<Brokers>> = Arc::default();
        let task_brokers = brokers.clone();
        let watched = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                metrics.observe(&task_labels, &event);
                match &event {
                    WorkerEvent::AttemptFailed { attempt, of, error, retry_in } => {
                        let mut view = task_retry.lock().unwrap_or_else(|e| e.into_inner());
                        let now = crate::catalog::now_ms();
                        let since = view.as_ref().map_or(now, |v: &RetryView| v.failing_since_ms);
                        *view = Some(RetryView {
                            attempt: *attempt,
                            of: *of,
                            error: error.clone(),
                            next_attempt_at_ms: retry_in.map(|d| now + d.as_millis() as i64),
                            failing_since_ms: since,
                        });
                    }
                    // The batch settled: committed, or dropped to be read again.
                    WorkerEvent::Committed(_) | WorkerEvent::Dropped { .. } => {
                        *task_retry.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    }
                    WorkerEvent::SourceRefused { reason } => {
                        still(&mut task_brokers.lock().unwrap_or_else(|e| e.into_inner()).refused, reason)
                    }
                    // The brokers took the client: the group assigned it partitions.
                    WorkerEvent::Assigned(_) => task_brokers.lock().unwrap_or_else(|e| e.into_inner()).refused = None,
                    WorkerEvent::SourceUnreachable { reason } => {
                        still(&mut task_brokers.lock().unwrap_or_else(|e| e.into_inner()).unreachable, reason)
                    }
                    WorkerEvent::SourceReachable => {
                        task_brokers.lock().unwrap_or_else(|e| e.into_inner()).unreachable = None
                    }
                    _ => {}
                }
                if let WorkerEvent::Registry(e) = &event {
                    let mut view = task_registry.lock().unwrap_or_else(|e| e.into_inner());
                    match e {
                        RegistryEvent::Waiting { error } => {
                            view.waiting_since_ms.get_or_insert_with(crate::catalog::now_ms);
                            view.waiting = Some(error.clone());
                        }
                        RegistryEvent::Reachable => (view.waiting, view.waiting_since_ms) = (None, None),
                        RegistryEvent::Schema { id, usable } => {
                            view.schema_ids.insert(*id, *usable);
                        }
                    }
                }
                let mut state = task_state.lock().unwrap_or_else(|e| e.into_inner());
                if let WorkerState::Consuming { partitions } = &mut *state {
                    match &event {
                        WorkerEvent::Assigned(p) => partitions.extend(p.keys()),
                        WorkerEvent::Revoked(p) => partitions.retain(|x| !p.contains(x)),
                        _ => {}
                    }
                    partitions.sort_unstable();
                    partitions.dedup();
                }
            }
        });
        let run = worker::run(publisher, self.node.clone(), self.options.clone(), Some(events_tx), shutdown);
        let (metrics, task_state, task_labels, task_key) =
            (self.metrics.clone(), state.clone(), labels.clone(), key.clone());
        let task = tokio::spawn(async move {
            let exit = run.await;
            let _ = watched.await;
            let failed = match exit {
                Ok(WorkerExit::Shutdown) => None,
                Ok(WorkerExit::Failed(error)) => Some(error),
                Err(error) => Some(format!("{error:#}")),
            };
            let mut state = task_state.lock().unwrap_or_else(|e| e.into_inner());
            match failed {
                Some(error) => {
                    tracing::error!(publisher = %task_key, %error, "publisher failed");
                    metrics.publisher_failed(&task_labels);
                    *state = WorkerState::Failed { error };
                }
                None => *state = WorkerState::Paused,
            }
        });
        let running =
            Running { stop, task: Some(task), state, registry, retry, brokers, labels, lag: None, fingerprint };
        self.workers().insert(key, running);
    }

    /// Records a publisher that could not even start.
    pub fn failed(&self, key: String, labels: PublisherLabels, error: String, fingerprint: String) {
        tracing::error!(publisher = %key, %error, "publisher cannot start");
        self.metrics.publisher_failed(&labels);
        let (stop, _) = watch::channel(true);
        let state = Arc::new(Mutex::new(WorkerState::Failed { error }));
        let registry = Arc::default();
        let (retry, brokers) = (Arc::default(), Arc::default());
        let running = Running { stop, task: None, state, registry, retry, brokers, labels, lag: None, fingerprint };
        self.workers().insert(key, running);
    }

    /// Stops a worker gracefully (its open batch is committed within the
    /// shutdown deadline) and forgets it.
    pub async fn stop(&self, key: &str) {
        let running = self.workers().remove(key);
        if let Some(mut running) = running {
            let _ = running.stop.send(true);
            if let Some(task) = running.task.take() {
                let _ = task.await;
            }
        }
    }

    pub async fn stop_all(&self) {
        let keys: Vec<String> = self.workers().keys().cloned().collect();
        futures::future::join_all(keys.iter().map(|k| self.stop(k))).await;
    }

    /// Every publisher this node has a worker for (running or failed), with
    /// what each was started from.
    pub fn fingerprints(&self) -> HashMap<String, String> {
        self.workers().iter().map(|(k, r)| (k.clone(), r.fingerprint.clone())).collect()
    }

    /// Every worker's state, by publisher key: what this node's heartbeat tells the cluster.
    pub fn holdings(&self) -> std::collections::BTreeMap<String, Holding> {
        let workers = self.workers();
        workers
            .iter()
            .map(|(k, r)| {
                let state = r.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
                (k.clone(), Holding { state, lag: r.lag })
            })
            .collect()
    }

    /// The worker's state; `None` when this node runs no worker for `key`.
    pub fn state(&self, key: &str) -> Option<WorkerState> {
        self.workers().get(key).map(|r| r.state.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// What the worker last heard from its schema registry; `None` when this node runs no worker for `key`.
    pub fn registry(&self, key: &str) -> Option<RegistryView> {
        self.workers().get(key).map(|r| r.registry.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The batch being retried, if one is; `None` too when this node runs no worker for `key`.
    pub fn retry(&self, key: &str) -> Option<RetryView> {
        self.workers().get(key).and_then(|r| r.retry.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Set while the brokers refuse this publisher's client.
    pub fn refused(&self, key: &str) -> Option<BrokerTrouble> {
        self.brokers(key).refused
    }

    /// Set while no broker can be reached from this publisher's client.
    pub fn unreachable(&self, key: &str) -> Option<BrokerTrouble> {
        self.brokers(key).unreachable
    }

    fn brokers(&self, key: &str) -> Brokers {
        self.workers().get(key).map(|r| r.brokers.lock().unwrap_or_else(|e| e.into_inner()).clone()).unwrap_or_default()
    }

    /// How many workers are in each state.
    pub fn counts(&self) -> Vec<(&'static str, i64)> {
        let mut counts: HashMap<&'static str, i64> = HashMap::new();
        for running in self.workers().values() {
            *counts.entry(running.state.lock().unwrap_or_else(|e| e.into_inner()).name()).or_default() += 1;
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort();
        counts
    }

    /// Sets the lag of every partition this node's workers hold, `(publisher,
    /// partition, lag)`, and forgets the others'.
    pub fn set_lags(&self, lags: &[(String, i32, i64)]) {
        let mut workers = self.workers();
        let mut totals: HashMap<&str, i64> = HashMap::new();
        for (publisher, _, lag) in lags {
            *totals.entry(publisher).or_default() += lag;
        }
        for (key, running) in workers.iter_mut() {
            running.lag = totals.get(key.as_str()).copied();
        }
        let labelled: Vec<(&PublisherLabels, i32, i64)> = lags
            .iter()
            .filter_map(|(publisher, partition, lag)| Some((&workers.get(publisher)?.labels, *partition, *lag)))
            .collect();
        self.metrics.set_lags(&labelled);
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What the node's workers share.
    pub fn node(&self) -> &Node {
        &self.node
    }
}
