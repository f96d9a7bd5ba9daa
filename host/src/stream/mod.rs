//! What one stream worker runs, in data-flow order: the open batch and its
//! rollover (`buffer`), the table files it stages and writes (`stage`), what
//! happens to a closed batch (`batch`: decoding's end, dead letters, the
//! plugin, the commit, retries), and the worker whose loop reads a source
//! into the open batch and hands each closed one on (`worker`). `rerun` puts
//! kept dead letters through the same path once their cause is fixed.
//!
//! Nothing here knows what kind of source it reads: that is `sources`'.

pub mod batch;
pub mod buffer;
pub mod rerun;
pub mod stage;
pub mod worker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::catalog::{Catalog, Execution};
use crate::formats::writers::RegistryEvent;
use crate::plugin::Runtime;
use crate::publisher::source::RolloverReason;
use buffer::MemoryBudget;

/// What a worker shares with the other workers of its node.
#[derive(Clone)]
pub struct Node {
    pub catalog: Arc<Catalog>,
    pub runtime: Arc<Runtime>,
    pub budget: Arc<MemoryBudget>,
    /// What the workers share of their sources (a Kafka consumer per connection).
    pub sources: Arc<crate::sources::Shared>,
}

/// How a worker retries and shuts down.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Attempts at one batch before the publisher is marked failed.
    pub max_attempts: u32,
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// How long a graceful shutdown may spend committing the open batch.
    pub shutdown_deadline: Duration,
    /// What the publish stage runs.
    pub publish: PublishStage,
}

/// What the publish stage runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PublishStage {
    /// The publisher's plugin, in the sandbox.
    #[default]
    Plugin,
    /// No plugin: the decoded batch is the output table. For benchmarks, to
    /// isolate the sandbox's cost; nothing a user registers runs this way.
    NativeIdentity,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            shutdown_deadline: Duration::from_secs(30),
            publish: PublishStage::Plugin,
        }
    }
}

/// What a worker reports as it goes (progress for `weir demo`, hooks for tests).
#[derive(Debug, Clone)]
pub enum WorkerEvent {
    Assigned(BTreeMap<i32, Option<i64>>),
    Revoked(Vec<i32>),
    /// A batch closed and is being processed.
    Closed {
        reason: RolloverReason,
        messages: usize,
        bytes: u64,
    },
    Committed(Execution),
    /// An attempt failed: attempt `attempt` of `of`, with the plugin's or the
    /// host's error; the batch is tried again in `retry_in` (`None`: it was
    /// the last attempt, and the publisher fails).
    AttemptFailed {
        attempt: u32,
        of: u32,
        error: String,
        retry_in: Option<Duration>,
    },
    /// The batch was dropped unprocessed; its partitions are re-read.
    Dropped {
        reason: String,
    },
    /// Registry mode: the schema registry is waited for, answers again, or served a writer schema.
    Registry(RegistryEvent),
    /// The source refused this worker (credentials, mechanism, TLS): nothing
    /// is read until it takes it. Cleared by the next assignment.
    SourceRefused {
        reason: String,
    },
    /// The source cannot be reached (every broker connection is down):
    /// nothing is read until it answers again, and nothing is lost.
    SourceUnreachable {
        reason: String,
    },
    /// It answers again.
    SourceReachable,
}

/// Why a worker stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerExit {
    Shutdown,
    /// Too many failed attempts at one batch; nothing of it was committed.
    Failed(String),
}

impl WorkerOptions {
    /// How long to wait before the next try after `tries` failed ones.
    pub fn backoff(&self, tries: u32) -> Duration {
        self.first_backoff.saturating_mul(1 << (tries.max(1) - 1).min(16)).min(self.max_backoff)
    }
}

/// Brings each of a publisher's tables' Delta logs up to the catalog before
/// its worker starts. A table another writer changed so that weir cannot
/// write into it stops the publisher here; the log failing for another
/// reason (a store outage) is waited out by the batches.
pub async fn sync_tables(node: &Node, publisher: &str, collection: &str, tables: &[String]) -> anyhow::Result<()> {
    for table in tables {
        let (catalog, collection, table) = (node.catalog.clone(), collection.to_string(), table.clone());
        let synced = tokio::task::spawn_blocking(move || crate::tables::delta::sync(&catalog, &collection, &table))
            .await
            .expect("writing the Delta log does not panic");
        if let Err(e) = synced {
            if e.downcast_ref::<crate::tables::delta::Blocked>().is_some() {
                return Err(e);
            }
            tracing::warn!(%publisher, error = %format!("{e:#}"), "bringing the Delta log of a table up to the catalog (tried again before each batch)");
        }
    }
    Ok(())
}

/// Resolves once shutdown is asked for (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
