//! Consuming: one rdkafka consumer in a consumer group, shared by the
//! workers of a node that read through the same connection (see `shared`),
//! one topic each, with offsets handled by hand. On every assignment each
//! topic's partitions are positioned at its publisher's catalog offsets (the
//! source of truth); Kafka's own group offsets are only a fallback for
//! partitions the catalog has never committed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol, StreamConsumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::BorrowedMessage;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use tokio::sync::{Notify, mpsc};

use crate::catalog::Catalog;
use crate::formats::RawMessage;
use crate::publisher::source::{KafkaConnection, StartFrom};

use super::check::{Watermarks, classify, refusal};
use super::queue::{self, Forwarding};

/// A change in the partitions a worker owns, or in whether the brokers take it.
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

/// A worker reading one topic through a shared consumer.
pub struct Member {
    pub publisher: String,
    pub events: mpsc::UnboundedSender<Assignment>,
    /// Where its partitions' messages go: the worker's queue.
    pub forwarding: Arc<Forwarding>,
    /// Where its messages that reached the consumer queue go (fetched before
    /// their partition was forwarded).
    pub strays: mpsc::UnboundedSender<RawMessage>,
    /// Where a partition that neither the catalog nor the group has an offset
    /// for starts; `None` when the settings say no position.
    pub start: Option<Start>,
    /// The partitions it holds now.
    pub assigned: BTreeSet<i32>,
}

/// A position a partition starts at.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    Position(Offset),
    /// The first message at or after this time (ms since the epoch).
    Time(i64),
}

/// The shared consumer's context: routes its assignments, errors and stray
/// messages to the workers by topic.
pub struct GroupContext {
    catalog: Arc<Catalog>,
    connection: KafkaConnection,
    /// `collection` and group, for the logs.
    label: String,
    members: Mutex<HashMap<String, Member>>,
    /// Every broker is unreachable: the consumer's task asks until one answers.
    down: AtomicBool,
    pub(super) probe: Notify,
}

impl ClientContext for GroupContext {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        match classify(error.rdkafka_error_code(), reason) {
            Some(refused) => {
                let message = refusal(&self.connection, refused, reason).to_string();
                tracing::warn!(group = %self.label, "{message}");
                self.tell_all(Assignment::Refused(message));
            }
            None if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) => {
                tracing::warn!(group = %self.label, "every broker is unreachable: {reason}");
                self.tell_all(Assignment::Unreachable(reason.to_string()));
                if !self.down.swap(true, Ordering::SeqCst) {
                    self.probe.notify_one();
                }
            }
            None => tracing::warn!(group = %self.label, error = %error, "librdkafka: {reason}"),
        }
    }
}

/// How long an assignment waits for the group's committed offsets before it
/// leaves looking them up to librdkafka.
const GROUP_OFFSETS_TIMEOUT: Duration = Duration::from_secs(2);

impl GroupContext {
    pub fn new(catalog: Arc<Catalog>, connection: KafkaConnection, label: String) -> Self {
        Self {
            catalog,
            connection,
            label,
            members: Mutex::default(),
            down: AtomicBool::new(false),
            probe: Notify::new(),
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn members(&self) -> MutexGuard<'_, HashMap<String, Member>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tell_all(&self, event: Assignment) {
        for member in self.members().values() {
            let _ = member.events.send(event.clone());
        }
    }

    /// Whether every broker was unreachable when last heard of.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// A broker answered again: every worker hears of it.
    pub fn reachable(&self) {
        if self.down.swap(false, Ordering::SeqCst) {
            self.tell_all(Assignment::Reachable);
        }
    }

    /// Where each partition its workers hold begins and ends, as the broker
    /// last said (every fetch answer carries both, an idle partition's too):
    /// `(publisher, topic, watermarks)`, asking the broker nothing.
    pub fn watermarks(&self, client: &rdkafka::client::Client<Self>) -> Vec<(String, String, Watermarks)> {
        let mut found = Vec::new();
        for (topic, member) in self.members().iter() {
            let Ok(name) = std::ffi::CString::new(topic.as_str()) else { continue };
            for &partition in &member.assigned {
                let (mut low, mut high) = (-1, -1);
                // SAFETY: the client outlives the call, the name is a valid C string, and
                // librdkafka only reads it and writes the two offsets.
                let err = unsafe {
                    rdkafka_sys::rd_kafka_get_watermark_offsets(
                        client.native_ptr(),
                        name.as_ptr(),
                        partition,
                        &mut low,
                        &mut high,
                    )
                };
                // Not yet fetched: the offsets are librdkafka's "invalid" (-1001).
                if err == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR && low >= 0 && high >= 0 {
                    found.push((member.publisher.clone(), topic.clone(), Watermarks { partition, low, high }));
                }
            }
        }
        found
    }

    /// Hands a message that reached the consumer queue to its topic's worker
    /// (if it still has one: otherwise its partition is being revoked).
    pub fn stray(&self, topic: &str, message: RawMessage) {
        if let Some(member) = self.members().get(topic) {
            let _ = member.strays.send(message);
        }
    }

    /// Positions the `fresh` partitions (those the catalog has no offset for)
    /// in `tpl` at the group's committed offsets, looked up now for every
    /// topic at once, or where their worker starts a new partition when the
    /// group has none; returns the group's offsets found.
    ///
    /// librdkafka would look the group's offsets up itself, but for a partition
    /// the group has none for, it then waits a fixed 100 ms before it asks the
    /// broker where the reset position is: a new publisher's first fetch came
    /// 100 ms late. When the lookup fails, the partitions are left to
    /// librdkafka as before.
    fn position_fresh(
        &self,
        consumer: &BaseConsumer<Self>,
        fresh: &[(String, i32, Option<Start>)],
        tpl: &mut TopicPartitionList,
    ) -> BTreeMap<(String, i32), i64> {
        let mut found = BTreeMap::new();
        if fresh.is_empty() {
            return found;
        }
        let mut ask = TopicPartitionList::new();
        for (topic, partition, _) in fresh {
            ask.add_partition(topic, *partition);
        }
        let committed = match consumer.committed_offsets(ask, GROUP_OFFSETS_TIMEOUT) {
            Ok(committed) => committed,
            Err(e) => {
                tracing::debug!(group = %self.label, error = %e, "looking up the group's offsets on assignment failed; librdkafka looks them up");
                return found;
            }
        };
        let mut times = TopicPartitionList::new();
        for (topic, partition, start) in fresh {
            let Some(element) = committed.find_partition(topic, *partition) else { continue };
            let start = match (element.error(), element.offset(), start) {
                (Ok(()), Offset::Offset(offset), _) => {
                    found.insert((topic.clone(), *partition), offset);
                    Offset::Offset(offset)
                }
                (Ok(()), Offset::Invalid, Some(Start::Position(start))) => *start,
                (Ok(()), Offset::Invalid, Some(Start::Time(ms))) => {
                    let _ = times.add_partition_offset(topic, *partition, Offset::Offset(*ms));
                    continue;
                }
                _ => continue,
            };
            let _ = tpl.set_partition_offset(topic, *partition, start);
        }
        for (topic, partition, offset) in self.offsets_for_times(consumer, times) {
            let _ = tpl.set_partition_offset(&topic, partition, offset);
        }
        found
    }

    /// Where partitions start for `kafka.start_from` a time: at the first
    /// message at or after it, as the broker finds it. Where it finds none (or
    /// cannot look times up: librdkafka's mock cluster and Tansu answer -1 or
    /// 0), or the lookup fails, they start at the beginning, and the source
    /// skips the messages before the time itself.
    fn offsets_for_times(&self, consumer: &BaseConsumer<Self>, ask: TopicPartitionList) -> Vec<(String, i32, Offset)> {
        if ask.count() == 0 {
            return vec![];
        }
        let found = match consumer.offsets_for_times(ask, GROUP_OFFSETS_TIMEOUT) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(group = %self.label, error = %e, "looking up the offsets for kafka.start_from failed; those partitions start at their beginning");
                return vec![];
            }
        };
        let starts: Vec<(String, i32, Offset)> = found
            .elements()
            .iter()
            .filter(|e| e.error().is_ok())
            .map(|e| {
                let start = match e.offset() {
                    Offset::Offset(o) if o >= 0 => Offset::Offset(o),
                    _ => Offset::Beginning,
                };
                (e.topic().to_string(), e.partition(), start)
            })
            .collect();
        tracing::info!(group = %self.label, ?starts, "partitions new to their publishers start at kafka.start_from's time");
        starts
    }

    fn assign(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) {
        let cooperative = matches!(consumer.rebalance_protocol(), RebalanceProtocol::Cooperative);
        let by_topic = by_topic(tpl);
        let mut members = self.members();
        // Each topic's partitions at its publisher's catalog offsets; a topic without a
        // worker now (it left since it subscribed) is not taken: the group moves it on.
        let mut take = TopicPartitionList::new();
        let mut assigned: Vec<(String, BTreeMap<i32, Option<i64>>)> = Vec::new();
        let mut fresh = Vec::new();
        for (topic, partitions) in &by_topic {
            let Some(member) = members.get(topic) else { continue };
            let stored = match self.catalog.offsets(&member.publisher, topic) {
                Ok(offsets) => offsets,
                Err(e) => {
                    // Without the catalog we cannot know where to start: take none of the
                    // topic's partitions, so the group gives them to a node that can.
                    tracing::error!(publisher = %member.publisher, error = %e, "reading offsets on assignment failed");
                    continue;
                }
            };
            let mut offsets = BTreeMap::new();
            for &partition in partitions {
                let offset = stored.get(&partition).copied();
                match offset {
                    Some(offset) => {
                        let _ = take.add_partition_offset(topic, partition, Offset::Offset(offset));
                    }
                    None => {
                        take.add_partition(topic, partition);
                        fresh.push((topic.clone(), partition, member.start));
                    }
                }
                offsets.insert(partition, offset);
            }
            assigned.push((topic.clone(), offsets));
        }
        let at_group = self.position_fresh(consumer, &fresh, &mut take);
        for (topic, offsets) in &assigned {
            // Say where each partition starts, and why: a partition the catalog has never
            // committed starts where the group left off, which surprises people who reuse a group.
            let member = &members[topic];
            let resumed: BTreeMap<i32, i64> = offsets.iter().filter_map(|(p, o)| Some((*p, (*o)?))).collect();
            let fallback: Vec<i32> = offsets.iter().filter(|(_, o)| o.is_none()).map(|(p, _)| *p).collect();
            let at_group: BTreeMap<i32, i64> =
                at_group.iter().filter(|((t, _), _)| t == topic).map(|((_, p), o)| (*p, *o)).collect();
            tracing::info!(
                publisher = %member.publisher, %topic, at_catalog_offsets = ?resumed, at_group_offsets_or_reset = ?fallback, ?at_group,
                "partitions assigned: those the catalog has committed resume at its offsets; the others start at the consumer group's committed offsets, or where kafka.start_from says when the group has none"
            );
        }
        // Forwarded before the assignment starts fetching, so that no message of a partition
        // assigned for the first time reaches the consumer queue (read there, it could come
        // after later ones read from the worker's queue), and again after it, since
        // assigning may clear what was forwarded before.
        let forward = |members: &HashMap<String, Member>| {
            for (topic, offsets) in &assigned {
                let partitions: Vec<i32> = offsets.keys().copied().collect();
                members[topic].forwarding.forward(consumer.client().native_ptr(), topic, &partitions);
            }
        };
        // Each worker hears of its partitions before any of their messages can reach it:
        // where they start (a partition new to the publisher skips what precedes
        // `kafka.start_from`'s time) must be known when the first is taken.
        for (topic, offsets) in &assigned {
            let member = members.get_mut(topic).expect("looked up above");
            member.assigned.extend(offsets.keys());
            let _ = member.events.send(Assignment::Assigned(offsets.clone()));
        }
        forward(&members);
        let result = if cooperative {
            consumer.incremental_assign(&take)
        } else {
            // Eager: the assignment is the whole of it, including what was taken before (none).
            consumer.assign(&take)
        };
        match result {
            Ok(()) => forward(&members),
            Err(e) => tracing::error!(group = %self.label, error = %e, "assigning partitions failed"),
        }
    }

    fn revoke(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        let mut members = self.members();
        for (topic, partitions) in by_topic(tpl) {
            let Some(member) = members.get_mut(&topic) else { continue };
            tracing::info!(publisher = %member.publisher, %topic, ?partitions, "partitions revoked");
            member.assigned.retain(|p| !partitions.contains(p));
            let _ = member.events.send(Assignment::Revoked(partitions));
        }
        let result = match consumer.rebalance_protocol() {
            RebalanceProtocol::Cooperative => consumer.incremental_unassign(tpl),
            _ => consumer.unassign(),
        };
        if let Err(e) = result {
            tracing::error!(group = %self.label, error = %e, "unassigning partitions failed");
        }
    }
}

/// The partitions of `tpl`, by topic.
fn by_topic(tpl: &TopicPartitionList) -> BTreeMap<String, Vec<i32>> {
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for element in tpl.elements() {
        topics.entry(element.topic().to_string()).or_default().push(element.partition());
    }
    topics
}

impl ConsumerContext for GroupContext {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => self.assign(consumer, tpl),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => self.revoke(consumer, tpl),
            other => tracing::error!(group = %self.label, error = ?other, "rebalance error"),
        }
    }
}

pub type GroupConsumer = StreamConsumer<GroupContext>;

/// librdkafka settings weir changes from librdkafka's defaults; a connection's
/// client settings override them.
///
/// * `fetch.queue.backoff.ms`: once a partition's prefetch queue is full, librdkafka
///   waits this long before fetching it again (1000 ms by default). A worker that
///   reads a backlog empties the queue far sooner, then sat idle: on a 1M-message
///   backlog, stalls of about 850 ms after every 3 batches cut throughput by a third.
/// * `queued.max.messages.kbytes`: how far librdkafka reads ahead of a worker
///   (64 MiB by default), on top of the batch the worker buffers: a worker's
///   partitions are forwarded to its own queue, whose size each of them is
///   fetched against. 4 MiB keeps a worker ~40 ms ahead at 100 MB/s. Measured with
///   `scripts/bench.sh`'s data on a local broker, peak RSS fell from 221 to 166 MB
///   at `kafka.size_rollover_mb = 16` and throughput did not drop (it rose ~8 %:
///   less memory to churn). A broker many milliseconds away may want more
///   read-ahead: set it in the connection.
/// * `fetch.wait.max.ms` is left at librdkafka's (and Kafka's) 500 ms: how
///   long a fetch may wait at the broker for data. Kafka, Redpanda and the
///   embedded broker (since weir's fix to it, vendor/rdkafka-sys/WEIR.md)
///   answer as soon as data arrives, so on them it costs no latency; each idle
///   consumer sends a fetch every 500 ms. Tansu holds an empty fetch for the
///   whole wait, delaying a quiet topic's messages by up to that much (the
///   embedded broker did too: produce-to-visible p50 / p99 with a 1 s time
///   rollover 949 / 1,501 ms, now 510 / 999). Fetches of 100 ms would lower
///   that on Tansu, but five times the fetches cost a node with 1,000 idle
///   publishers in 100 connections 0.09 of a core instead of 0.05 (`cargo
///   bench --bench density`): a connection to such a broker that wants the
///   lower latency sets it (`--client-setting fetch.wait.max.ms=100`).
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
/// * `partition.assignment.strategy`: `cooperative-sticky`, so that a publisher
///   joining or leaving a shared consumer (registered, paused, deleted) moves
///   only its own topic's partitions: with the eager assignors every worker on
///   the connection would have its partitions revoked, its open batch dropped.
pub const CONSUMER_DEFAULTS: &[(&str, &str)] = &[
    ("fetch.queue.backoff.ms", "10"),
    ("queued.max.messages.kbytes", "4096"),
    ("session.timeout.ms", "6000"),
    ("heartbeat.interval.ms", "1000"),
    ("partition.assignment.strategy", "cooperative-sticky"),
];

/// What makes workers able to share a consumer: the same collection,
/// connection and group, and the same start for a partition neither the
/// catalog nor the group has an offset for (`auto.offset.reset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub collection: String,
    pub group: String,
    pub connection: KafkaConnection,
    pub reset: &'static str,
}

impl Key {
    /// What `publisher`'s worker may share a consumer on.
    pub fn of(publisher: &crate::publisher::StreamPublisher) -> Self {
        Self {
            collection: publisher.collection.clone(),
            group: publisher.group_id(),
            connection: publisher.connection.clone(),
            reset: Self::reset_for(publisher.source.config.start_from),
        }
    }

    /// `auto.offset.reset` for `start_from` (a time is looked up on assignment;
    /// librdkafka's own fallback is then the beginning).
    pub fn reset_for(start_from: StartFrom) -> &'static str {
        match start_from {
            StartFrom::Earliest | StartFrom::Time(_) => "earliest",
            StartFrom::Latest => "latest",
        }
    }

    /// The consumer's settings.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("group.id", &self.group).set("auto.offset.reset", self.reset);
        for (key, value) in CONSUMER_DEFAULTS {
            config.set(*key, *value);
        }
        // The connection's settings (its pass-through map included) come next and may override all of these...
        for (k, v) in self.connection.client_config() {
            config.set(k, v);
        }
        // ...but offsets are ours: the catalog's first, the group's only so lag tools see progress.
        config.set("enable.auto.commit", "false").set("enable.auto.offset.store", "false");
        config
    }

    /// Where a partition without any offset starts for a worker that starts
    /// from `start_from`, as the settings have it in the end.
    pub fn start(config: &ClientConfig, start_from: StartFrom) -> Option<Start> {
        match (start_from, config.get("auto.offset.reset")) {
            (StartFrom::Time(ms), Some("earliest")) => Some(Start::Time(ms)),
            (_, Some("earliest" | "smallest" | "beginning")) => Some(Start::Position(Offset::Beginning)),
            (_, Some("latest" | "largest" | "end")) => Some(Start::Position(Offset::End)),
            _ => None,
        }
    }
}

/// Copies what weir keeps of a message read from the consumer queue out of
/// librdkafka's buffer (see [`queue::MessageQueue`] for the rest).
pub fn to_raw(message: &BorrowedMessage<'_>) -> rdkafka::error::KafkaResult<RawMessage> {
    // SAFETY: a message the consumer handed out, alive while borrowed.
    unsafe { queue::copy(&*message.ptr()) }
}

#[cfg(test)]
mod tests {
    unsafe extern "C" {
        /// librdkafka's own tests of its assignors (vendor/rdkafka-sys/WEIR.md).
        fn unittest_assignors() -> std::ffi::c_int;
    }

    /// The cooperative-sticky assignor weir's consumers use, with the fixes
    /// vendored librdkafka carries: without them its balancing aborted the
    /// process in some rebalances (a partition moved and moved back kept its
    /// movement, the next move's assertion failed).
    #[test]
    fn the_assignors_pass_librdkafkas_own_tests_and_ours() {
        // SAFETY: self-contained; it makes and destroys its own clients.
        let failures = unsafe { unittest_assignors() };
        assert_eq!(failures, 0, "librdkafka's assignor tests failed: their output is above");
    }
}
