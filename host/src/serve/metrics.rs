//! Prometheus metrics of the stream workers, fed from their events.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::formats::writers::RegistryEvent;
use crate::stream::WorkerEvent;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PublisherLabels {
    pub tenant: String,
    pub collection: String,
    pub publisher: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    tenant: String,
    collection: String,
    publisher: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    tenant: String,
    collection: String,
    publisher: String,
    partition: i32,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TableLabels {
    /// The collection's key (`tenant/group/collection`).
    collection: String,
    table: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeldLabels {
    node: String,
    publisher: String,
}

/// A node of the cluster as the catalog last heard of it, for the metrics.
#[derive(Debug, Clone)]
pub struct ClusterNode {
    pub id: String,
    pub live: bool,
    pub heartbeat_age_secs: f64,
    /// Partitions it holds, by publisher (`tenant/group/collection/name`).
    pub partitions: Vec<(String, i64)>,
}

pub struct Metrics {
    registry: Registry,
    batches_closed: Family<ReasonLabels, Counter>,
    batches_committed: Family<PublisherLabels, Counter>,
    rows_committed: Family<PublisherLabels, Counter>,
    dead_letters: Family<PublisherLabels, Counter>,
    plugin_seconds: Family<PublisherLabels, Counter<f64, AtomicU64>>,
    plugin_cpu_seconds: Family<PublisherLabels, Counter<f64, AtomicU64>>,
    attempts_failed: Family<PublisherLabels, Counter>,
    publishers_failed: Family<PublisherLabels, Counter>,
    partitions_revoked: Family<PublisherLabels, Counter>,
    consumer_lag: Family<PartitionLabels, Gauge>,
    publishers: Family<StateLabels, Gauge>,
    registry_waiting: Family<PublisherLabels, Gauge>,
    batch_retrying: Family<PublisherLabels, Gauge>,
    broker_refused: Family<PublisherLabels, Gauge>,
    broker_unreachable: Family<PublisherLabels, Gauge>,
    broker_unreachable_since: Family<PublisherLabels, Gauge>,
    node_live: Family<NodeLabels, Gauge>,
    node_heartbeat_age: Family<NodeLabels, Gauge<f64, AtomicU64>>,
    node_partitions: Family<HeldLabels, Gauge>,
    unlogged: Family<TableLabels, Gauge>,
    kafka_consumers: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("weir");
        let m = Self {
            batches_closed: Family::default(),
            batches_committed: Family::default(),
            rows_committed: Family::default(),
            dead_letters: Family::default(),
            plugin_seconds: Family::default(),
            plugin_cpu_seconds: Family::default(),
            attempts_failed: Family::default(),
            publishers_failed: Family::default(),
            partitions_revoked: Family::default(),
            consumer_lag: Family::default(),
            publishers: Family::default(),
            registry_waiting: Family::default(),
            batch_retrying: Family::default(),
            broker_refused: Family::default(),
            broker_unreachable: Family::default(),
            broker_unreachable_since: Family::default(),
            node_live: Family::default(),
            node_heartbeat_age: Family::default(),
            node_partitions: Family::default(),
            unlogged: Family::default(),
            kafka_consumers: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register("batches_closed", "Batches closed, by rollover reason", m.batches_closed.clone());
        registry.register("batches_committed", "Batches committed as table versions", m.batches_committed.clone());
        registry.register("rows_committed", "Rows committed to the output table", m.rows_committed.clone());
        registry.register("dead_letters", "Messages that failed to decode", m.dead_letters.clone());
        registry.register("plugin_seconds", "Time spent in the publisher plugin", m.plugin_seconds.clone());
        registry.register(
            "plugin_cpu_seconds",
            "CPU time the publisher plugin's calls used",
            m.plugin_cpu_seconds.clone(),
        );
        registry.register("batch_attempts_failed", "Failed attempts at a batch (retried)", m.attempts_failed.clone());
        registry.register(
            "publisher_failures",
            "Publishers that gave up after their retries",
            m.publishers_failed.clone(),
        );
        registry.register(
            "partitions_revoked",
            "Partitions a rebalance took from the publisher's worker (what it buffered of them is dropped, and re-read by whoever gets them)",
            m.partitions_revoked.clone(),
        );
        registry.register("consumer_lag", "Messages on the topic not yet committed", m.consumer_lag.clone());
        registry.register("publishers", "Publishers by worker state", m.publishers.clone());
        registry.register(
            "registry_waiting",
            "1 while a publisher waits for its schema registry to answer (messages are held, not dead-lettered)",
            m.registry_waiting.clone(),
        );
        registry.register(
            "batch_retrying",
            "The failed attempts of the batch being retried (0: none is)",
            m.batch_retrying.clone(),
        );
        registry.register(
            "broker_refused",
            "1 while the brokers refuse a publisher's client (credentials, SASL mechanism or TLS)",
            m.broker_refused.clone(),
        );
        registry.register(
            "broker_unreachable",
            "1 while no broker can be reached from a publisher's client (nothing is read, nothing is lost)",
            m.broker_unreachable.clone(),
        );
        registry.register(
            "broker_unreachable_since_seconds",
            "When the brokers became unreachable from a publisher's client, in seconds since the epoch (0: they are reachable)",
            m.broker_unreachable_since.clone(),
        );
        registry.register(
            "kafka_consumers",
            "Kafka consumers this node holds: one per connection and consumer group its running publishers read through",
            m.kafka_consumers.clone(),
        );
        registry.register(
            "cluster_node_live",
            "Each node of the cluster: 1 while its heartbeat is recent, 0 once it has gone silent",
            m.node_live.clone(),
        );
        registry.register(
            "cluster_node_heartbeat_age_seconds",
            "Time since each node's last heartbeat",
            m.node_heartbeat_age.clone(),
        );
        registry.register(
            "cluster_partitions",
            "Partitions each node's worker of each publisher holds (as its last heartbeat said)",
            m.node_partitions.clone(),
        );
        registry.register(
            "table_versions_unlogged",
            "Versions of a table committed but not yet in its Delta log, which no reader sees (0 series: none)",
            m.unlogged.clone(),
        );
        Self { registry, ..m }
    }
}

impl Metrics {
    pub fn observe(&self, labels: &PublisherLabels, event: &WorkerEvent) {
        match event {
            WorkerEvent::Closed { reason, .. } => {
                let l = labels.clone();
                let reason = reason.as_str().to_string();
                self.batches_closed
                    .get_or_create(&ReasonLabels {
                        tenant: l.tenant,
                        collection: l.collection,
                        publisher: l.publisher,
                        reason,
                    })
                    .inc();
            }
            WorkerEvent::Committed(e) => {
                self.batch_retrying.get_or_create(labels).set(0);
                self.batches_committed.get_or_create(labels).inc();
                self.rows_committed.get_or_create(labels).inc_by(e.rows_out);
                self.dead_letters.get_or_create(labels).inc_by(e.dead_letters);
                self.plugin_seconds.get_or_create(labels).inc_by((e.timings_ms.publish - e.timings_ms.write) / 1000.0);
                self.plugin_cpu_seconds.get_or_create(labels).inc_by(e.timings_ms.plugin_cpu / 1000.0);
            }
            WorkerEvent::AttemptFailed { attempt, .. } => {
                self.attempts_failed.get_or_create(labels).inc();
                self.batch_retrying.get_or_create(labels).set(i64::from(*attempt));
            }
            WorkerEvent::Dropped { .. } => {
                self.batch_retrying.get_or_create(labels).set(0);
            }
            WorkerEvent::Registry(RegistryEvent::Waiting { .. }) => {
                self.registry_waiting.get_or_create(labels).set(1);
            }
            WorkerEvent::Registry(RegistryEvent::Reachable) => {
                self.registry_waiting.get_or_create(labels).set(0);
            }
            WorkerEvent::SourceRefused { .. } => {
                self.broker_refused.get_or_create(labels).set(1);
            }
            WorkerEvent::Assigned(_) => {
                self.broker_refused.get_or_create(labels).set(0);
            }
            WorkerEvent::SourceUnreachable { .. } => {
                if self.broker_unreachable.get_or_create(labels).set(1) == 0 {
                    self.broker_unreachable_since.get_or_create(labels).set(crate::catalog::now_ms() / 1000);
                }
            }
            WorkerEvent::SourceReachable => {
                self.broker_unreachable.get_or_create(labels).set(0);
                self.broker_unreachable_since.get_or_create(labels).set(0);
            }
            WorkerEvent::Revoked(partitions) => {
                self.partitions_revoked.get_or_create(labels).inc_by(partitions.len() as u64);
            }
            WorkerEvent::Registry(RegistryEvent::Schema { .. }) => {}
        }
    }

    pub fn publisher_failed(&self, labels: &PublisherLabels) {
        self.publishers_failed.get_or_create(labels).inc();
    }

    /// Replaces every partition's lag with `lags` (labels, partition, lag).
    pub fn set_lags(&self, lags: &[(&PublisherLabels, i32, i64)]) {
        self.consumer_lag.clear();
        for (labels, partition, lag) in lags {
            let l = (*labels).clone();
            self.consumer_lag
                .get_or_create(&PartitionLabels {
                    tenant: l.tenant,
                    collection: l.collection,
                    publisher: l.publisher,
                    partition: *partition,
                })
                .set(*lag);
        }
    }

    /// Renders the metrics, with this node's publishers counted by `states`,
    /// the cluster's `nodes`, the tables whose logs lack versions
    /// (`unlogged`: collection key, table, how many), and the Kafka consumers the node holds.
    pub fn render(
        &self,
        states: &[(&str, i64)],
        nodes: &[ClusterNode],
        unlogged: &[(String, String, i64)],
        kafka_consumers: usize,
    ) -> String {
        self.kafka_consumers.set(kafka_consumers as i64);
        self.unlogged.clear();
        for (collection, table, n) in unlogged {
            self.unlogged.get_or_create(&TableLabels { collection: collection.clone(), table: table.clone() }).set(*n);
        }
        self.publishers.clear();
        for (state, n) in states {
            self.publishers.get_or_create(&StateLabels { state: state.to_string() }).set(*n);
        }
        (self.node_live.clear(), self.node_heartbeat_age.clear(), self.node_partitions.clear());
        for node in nodes {
            let labels = NodeLabels { node: node.id.clone() };
            self.node_live.get_or_create(&labels).set(i64::from(node.live));
            self.node_heartbeat_age.get_or_create(&labels).set(node.heartbeat_age_secs);
            for (publisher, held) in &node.partitions {
                let labels = HeldLabels { node: node.id.clone(), publisher: publisher.clone() };
                self.node_partitions.get_or_create(&labels).set(*held);
            }
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/reference/metrics.md` lists every metric the server registers.
    #[test]
    fn the_metrics_reference_lists_every_metric() {
        let page = include_str!("../../../docs/reference/metrics.md");
        // Families without a series are not rendered: give each one.
        let m = Metrics::default();
        let l = PublisherLabels { tenant: "t".into(), collection: "c".into(), publisher: "p".into() };
        m.observe(
            &l,
            &WorkerEvent::Closed { reason: crate::publisher::source::RolloverReason::Time, messages: 1, bytes: 1 },
        );
        m.observe(&l, &WorkerEvent::AttemptFailed { attempt: 1, of: 5, error: "e".into(), retry_in: None });
        m.observe(&l, &WorkerEvent::SourceRefused { reason: "r".into() });
        m.observe(&l, &WorkerEvent::Revoked(vec![0]));
        m.observe(&l, &WorkerEvent::SourceUnreachable { reason: "r".into() });
        m.observe(&l, &WorkerEvent::Registry(RegistryEvent::Reachable));
        for family in [&m.batches_committed, &m.rows_committed, &m.dead_letters] {
            family.get_or_create(&l).inc();
        }
        for family in [&m.plugin_seconds, &m.plugin_cpu_seconds] {
            family.get_or_create(&l).inc();
        }
        m.publisher_failed(&l);
        m.set_lags(&[(&l, 0, 1)]);
        let node =
            ClusterNode { id: "n".into(), live: true, heartbeat_age_secs: 0.0, partitions: vec![("p".into(), 1)] };
        let text = m.render(&[("consuming", 1)], &[node], &[("c".into(), "t".into(), 1)], 1);
        let mut names = Vec::new();
        for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
            let (name, kind) = line.split_once(' ').unwrap();
            names.push(if kind == "counter" { format!("{name}_total") } else { name.to_string() });
        }
        assert!(names.len() >= 15, "{text}");
        let missing: Vec<&String> = names.iter().filter(|n| !page.contains(&format!("`{n}`"))).collect();
        assert!(missing.is_empty(), "docs/reference/metrics.md does not list {missing:?}");
    }
}
