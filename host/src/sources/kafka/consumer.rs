//! Consuming: an rdkafka consumer in the publisher's group, with offsets
//! handled by hand. On every assignment the consumer is positioned at the
//! catalog's offsets (the source of truth); Kafka's own group offsets are only
//! a fallback for partitions the catalog has never committed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaResult, RDKafkaErrorCode};
use rdkafka::message::BorrowedMessage;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use tokio::sync::mpsc;

use crate::catalog::Catalog;
use crate::formats::RawMessage;
use crate::publisher::source::{KafkaConnection, StartFrom};

use super::check::{classify, refusal};
use super::queue::{self, Forwarding, MessageQueue};

/// A change in the partitions this worker owns, or in whether the brokers take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// Newly assigned, with the catalog's offsets they were positioned at.
    Assigned(BTreeMap<i32, Option<i64>>),
    Revoked(Vec<i32>),
    /// The brokers refused the credentials, the mechanism or the TLS handshake
    /// (librdkafka keeps trying; the worker waits, and says why).
    Refused(String),
    /// No broker can be reached (librdkafka's "all brokers down"), for this reason.
    Unreachable(String),
    /// A broker answered again after [`Assignment::Unreachable`].
    Reachable,
}

/// Positions assigned partitions at the catalog's offsets and tells the worker.
pub struct WorkerContext {
    catalog: Arc<Catalog>,
    publisher: String,
    topic: String,
    connection: KafkaConnection,
    events: mpsc::UnboundedSender<Assignment>,
    /// Where assigned partitions' messages go: the worker's [`MessageQueue`].
    forwarding: Arc<Forwarding>,
    /// Where a partition that neither the catalog nor the group has an offset
    /// for starts (`kafka.start_from`, or `auto.offset.reset` as the
    /// connection's settings have it); `None` when that is not a position.
    start: Option<Start>,
}

/// A position a partition starts at.
#[derive(Debug, Clone, Copy)]
enum Start {
    Position(Offset),
    /// The first message at or after this time (ms since the epoch).
    Time(i64),
}

impl ClientContext for WorkerContext {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        match classify(error.rdkafka_error_code(), reason) {
            Some(refused) => {
                let message = refusal(&self.connection, refused, reason).to_string();
                tracing::warn!(publisher = %self.publisher, "{message}");
                let _ = self.events.send(Assignment::Refused(message));
            }
            None if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) => {
                tracing::warn!(publisher = %self.publisher, "every broker is unreachable: {reason}");
                let _ = self.events.send(Assignment::Unreachable(reason.to_string()));
            }
            None => tracing::warn!(publisher = %self.publisher, error = %error, "librdkafka: {reason}"),
        }
    }
}

/// How long an assignment waits for the group's committed offsets before it
/// leaves looking them up to librdkafka.
const GROUP_OFFSETS_TIMEOUT: Duration = Duration::from_secs(2);

impl WorkerContext {
    /// Where the worker hears of assignments, for a probe that tells it the brokers answer again.
    pub fn events(&self) -> mpsc::UnboundedSender<Assignment> {
        self.events.clone()
    }

    /// Positions `partitions` (those the catalog has no offset for) in `tpl`
    /// at the group's committed offsets, looked up now, or at the reset
    /// position where the group has none; returns the group's offsets found.
    ///
    /// librdkafka would look the group's offsets up itself, but for a partition
    /// the group has none for, it then waits a fixed 100 ms before it asks the
    /// broker where the reset position is: a new publisher's first fetch came
    /// 100 ms late. When the lookup fails, the partitions are left to
    /// librdkafka as before.
    fn position_at_group_offsets(
        &self,
        consumer: &BaseConsumer<Self>,
        partitions: &[i32],
        tpl: &mut TopicPartitionList,
    ) -> BTreeMap<i32, i64> {
        let mut found = BTreeMap::new();
        if partitions.is_empty() {
            return found;
        }
        let mut ask = TopicPartitionList::new();
        for &partition in partitions {
            ask.add_partition(&self.topic, partition);
        }
        let committed = match consumer.committed_offsets(ask, GROUP_OFFSETS_TIMEOUT) {
            Ok(committed) => committed,
            Err(e) => {
                tracing::debug!(publisher = %self.publisher, error = %e, "looking up the group's offsets on assignment failed; librdkafka looks them up");
                return found;
            }
        };
        let mut fresh = Vec::new();
        for element in committed.elements_for_topic(&self.topic) {
            let start = match (element.error(), element.offset()) {
                (Ok(()), Offset::Offset(offset)) => {
                    found.insert(element.partition(), offset);
                    Offset::Offset(offset)
                }
                (Ok(()), Offset::Invalid) => match self.start {
                    Some(Start::Position(start)) => start,
                    Some(Start::Time(ms)) => {
                        fresh.push((element.partition(), ms));
                        continue;
                    }
                    None => continue,
                },
                _ => continue,
            };
            let _ = tpl.set_partition_offset(&self.topic, element.partition(), start);
        }
        for (partition, offset) in self.offsets_for_times(consumer, &fresh) {
            let _ = tpl.set_partition_offset(&self.topic, partition, offset);
        }
        found
    }

    /// Where `partitions` start for `kafka.start_from` a time: at the first
    /// message at or after it, as the broker finds it. Where it finds none (or
    /// cannot look times up: librdkafka's mock cluster and Tansu answer -1 or
    /// 0), or the lookup fails, they start at the beginning, and the source
    /// skips the messages before the time itself.
    fn offsets_for_times(&self, consumer: &BaseConsumer<Self>, partitions: &[(i32, i64)]) -> Vec<(i32, Offset)> {
        if partitions.is_empty() {
            return vec![];
        }
        let mut ask = TopicPartitionList::new();
        for &(partition, ms) in partitions {
            let _ = ask.add_partition_offset(&self.topic, partition, Offset::Offset(ms));
        }
        let found = match consumer.offsets_for_times(ask, GROUP_OFFSETS_TIMEOUT) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(publisher = %self.publisher, error = %e, "looking up the offsets for kafka.start_from failed; those partitions start at their beginning");
                return vec![];
            }
        };
        let starts: Vec<(i32, Offset)> = found
            .elements_for_topic(&self.topic)
            .iter()
            .filter(|e| e.error().is_ok())
            .map(|e| {
                let start = match e.offset() {
                    Offset::Offset(o) if o >= 0 => Offset::Offset(o),
                    _ => Offset::Beginning,
                };
                (e.partition(), start)
            })
            .collect();
        tracing::info!(publisher = %self.publisher, topic = %self.topic, ?starts, "partitions new to the publisher start at kafka.start_from's time");
        starts
    }
}

impl ConsumerContext for WorkerContext {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        let partitions: Vec<i32> = tpl.elements_for_topic(&self.topic).iter().map(|e| e.partition()).collect();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let stored = match self.catalog.offsets(&self.publisher, &self.topic) {
                    Ok(offsets) => offsets,
                    Err(e) => {
                        // Without the catalog we cannot know where to start: take nothing,
                        // so the group gives these partitions to a worker that can.
                        tracing::error!(publisher = %self.publisher, error = %e, "reading offsets on assignment failed");
                        let _ = consumer.unassign();
                        return;
                    }
                };
                let mut assigned = BTreeMap::new();
                for partition in partitions {
                    let offset = stored.get(&partition).copied();
                    if let Some(offset) = offset {
                        let _ = tpl.set_partition_offset(&self.topic, partition, Offset::Offset(offset));
                    }
                    assigned.insert(partition, offset);
                }
                // Say where each partition starts, and why: a partition the catalog has never
                // committed starts where the group left off, which surprises people who reuse a group.
                let resumed: BTreeMap<i32, i64> = assigned.iter().filter_map(|(p, o)| Some((*p, (*o)?))).collect();
                let fallback: Vec<i32> = assigned.iter().filter(|(_, o)| o.is_none()).map(|(p, _)| *p).collect();
                let at_group = self.position_at_group_offsets(consumer, &fallback, tpl);
                tracing::info!(
                    publisher = %self.publisher, topic = %self.topic, at_catalog_offsets = ?resumed, at_group_offsets_or_reset = ?fallback, ?at_group,
                    "partitions assigned: those the catalog has committed resume at its offsets; the others start at the consumer group's committed offsets, or by auto.offset.reset when the group has none"
                );
                // Forwarded before the assignment starts fetching, so that no message of a
                // partition assigned for the first time reaches the consumer queue (read
                // there, it could come after later ones read from the worker's queue), and
                // again after it, since assigning may clear what was forwarded before.
                let forwarded: Vec<i32> = assigned.keys().copied().collect();
                self.forwarding.forward(consumer.client().native_ptr(), &self.topic, &forwarded);
                match consumer.assign(tpl) {
                    Ok(()) => self.forwarding.forward(consumer.client().native_ptr(), &self.topic, &forwarded),
                    Err(e) => tracing::error!(publisher = %self.publisher, error = %e, "assigning partitions failed"),
                }
                let _ = self.events.send(Assignment::Assigned(assigned));
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                tracing::info!(publisher = %self.publisher, topic = %self.topic, ?partitions, "partitions revoked");
                let _ = self.events.send(Assignment::Revoked(partitions));
                if let Err(e) = consumer.unassign() {
                    tracing::error!(publisher = %self.publisher, error = %e, "unassigning partitions failed");
                }
            }
            other => tracing::error!(publisher = %self.publisher, error = ?other, "rebalance error"),
        }
    }
}

pub type WorkerConsumer = StreamConsumer<WorkerContext>;

/// librdkafka settings weir changes from librdkafka's defaults; a connection's
/// client settings override them.
///
/// * `fetch.queue.backoff.ms`: once a partition's prefetch queue is full, librdkafka
///   waits this long before fetching it again (1000 ms by default). A worker that
///   reads a backlog empties the queue far sooner, then sat idle: on a 1M-message
///   backlog, stalls of about 850 ms after every 3 batches cut throughput by a third.
/// * `queued.max.messages.kbytes`: how far librdkafka reads ahead of the worker
///   (64 MiB by default), on top of the batch the worker buffers. 4 MiB keeps a
///   worker ~40 ms ahead at 100 MB/s. Measured with `scripts/bench.sh`'s data on
///   a local broker, peak RSS fell from 221 to 166 MB at `kafka.size_rollover_mb = 16`
///   and throughput did not drop (it rose ~8 %: less memory to churn). A broker
///   many milliseconds away may want more read-ahead: set it in the connection.
/// * `fetch.wait.max.ms`: how long a fetch may wait at the broker for data
///   (500 ms by default). A broker that holds an empty fetch for the whole wait
///   instead of answering when data arrives delays every message of a quiet
///   topic by up to that much; the embedded broker and Tansu behave so, judging
///   by what lowering it did. At 100 ms the benchmark's produce-to-visible
///   p50 / p99 with a 1 s time rollover fell from about 900 / 1,500 ms to
///   600 / 1,100 ms on the embedded broker and to 540 / 1,030 ms on Tansu.
///   An idle worker sends a fetch 10 times a second instead of twice.
/// * `session.timeout.ms` / `heartbeat.interval.ms`: how long the group waits for
///   a member that stopped sending heartbeats before it gives its partitions to
///   the others (45 s / 3 s by default). A node killed with -9 or cut off holds
///   its partitions that long, so this bounds a cluster's failover. 6 s / 1 s:
///   6 s is the least a stock broker accepts (`group.min.session.timeout.ms`).
///   Kafka raised its default to 45 s (KIP-735) because a rebalance stalls
///   consumers that process as they poll; for weir a spurious one costs one batch
///   dropped and re-read, never a duplicate (the catalog's compare-and-set), and
///   librdkafka sends heartbeats from its own thread, so a worker busy with a
///   long batch does not miss them (a stuck worker is `max.poll.interval.ms`'s
///   business, 5 min). Measured with three nodes on Tansu (tests/cluster.rs):
///   kill -9 of a node → its partitions held by the others in 15.8 s at 10 s,
///   see the README for 6 s. A broker that wants longer sessions: set it in the
///   connection (`--client-setting session.timeout.ms=…`).
pub const CONSUMER_DEFAULTS: &[(&str, &str)] = &[
    ("fetch.queue.backoff.ms", "10"),
    ("queued.max.messages.kbytes", "4096"),
    ("fetch.wait.max.ms", "100"),
    ("session.timeout.ms", "6000"),
    ("heartbeat.interval.ms", "1000"),
];

/// A consumer for one publisher, subscribed to its topic, and the queue its
/// messages arrive on.
pub fn subscribe(
    connection: &KafkaConnection,
    group_id: &str,
    start_from: StartFrom,
    catalog: Arc<Catalog>,
    publisher: &str,
    topic: &str,
) -> KafkaResult<(Arc<WorkerConsumer>, MessageQueue, mpsc::UnboundedReceiver<Assignment>)> {
    // A time is looked up on assignment; librdkafka's own fallback is then the beginning.
    let reset_setting = match start_from {
        StartFrom::Earliest | StartFrom::Time(_) => "earliest",
        StartFrom::Latest => "latest",
    };
    let mut config = ClientConfig::new();
    config.set("group.id", group_id).set("auto.offset.reset", reset_setting);
    for (key, value) in CONSUMER_DEFAULTS {
        config.set(*key, *value);
    }
    // The connection's settings (its pass-through map included) come next and may override all of these...
    for (k, v) in connection.client_config() {
        config.set(k, v);
    }
    // ...but offsets are ours: the catalog's first, the group's only so lag tools see progress.
    config.set("enable.auto.commit", "false").set("enable.auto.offset.store", "false");
    // Where a partition without any offset starts, as the settings have it in the end.
    let start = match (start_from, config.get("auto.offset.reset")) {
        (StartFrom::Time(ms), Some("earliest")) => Some(Start::Time(ms)),
        (_, Some("earliest" | "smallest" | "beginning")) => Some(Start::Position(Offset::Beginning)),
        (_, Some("latest" | "largest" | "end")) => Some(Start::Position(Offset::End)),
        _ => None,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let context = WorkerContext {
        catalog,
        publisher: publisher.to_string(),
        topic: topic.to_string(),
        connection: connection.clone(),
        events: tx,
        forwarding: Arc::new(Forwarding::default()),
        start,
    };
    let forwarding = context.forwarding.clone();
    let consumer: Arc<WorkerConsumer> = Arc::new(config.create_with_context(context)?);
    // The queue is in place before any partition can be assigned.
    let queue = MessageQueue::new(consumer.clone(), forwarding);
    consumer.subscribe(&[topic])?;
    Ok((consumer, queue, rx))
}

/// Copies what weir keeps of a message read from the consumer queue out of
/// librdkafka's buffer (see [`MessageQueue`] for the rest).
pub fn to_raw(message: &BorrowedMessage<'_>) -> KafkaResult<RawMessage> {
    // SAFETY: a message the consumer handed out, alive while borrowed.
    unsafe { queue::copy(&*message.ptr()) }
}
