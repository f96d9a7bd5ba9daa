//! The Kafka source behind the worker's interface: the worker's place in its
//! connection's shared consumer, whose assignments of its topic become
//! [`SourceEvent`]s; its messages are taken from the worker's own queue (or,
//! the few fetched before their partition was forwarded there, as the
//! consumer's task hands them over), and committed batches move the group's offsets.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::future::BoxFuture;
use rdkafka::consumer::{CommitMode, Consumer as _};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::consumer::{Assignment, Key};
use super::dead_letters::DeadLetterTopic;
use super::queue::MessageQueue;
use super::shared::{Membership, Pool, Shared};
use crate::catalog::{Catalog, PartitionRange};
use crate::formats::registry::RegistryClient;
use crate::formats::writers::{Observer, WriterSchemas, subject_of};
use crate::formats::{DeadLetter, Decoder, Format, KeyFormat, Part, RawMessage};
use crate::publisher::StreamPublisher;
use crate::publisher::source::StartFrom;
use crate::sources::{Acknowledge, Opened, Ready, Source, SourceEvent};

/// Opens a publisher's topic: its worker joins its connection's consumer,
/// which subscribes to the topic, with the worker's queue in place; its
/// dead-letter topic's producer; its decoder.
pub fn open(
    publisher: &StreamPublisher,
    catalog: Arc<Catalog>,
    pool: &Pool,
    observer: Option<Observer>,
) -> anyhow::Result<Opened> {
    let (id, topic) = (publisher.id(), publisher.source.topic.clone());
    let start_from = publisher.source.config.start_from;
    let (membership, queue) = pool
        .join(&catalog, Key::of(publisher), start_from, &id, &topic)
        .with_context(|| format!("creating the Kafka consumer for {id}"))?;
    let dead_letter_topic = match &publisher.source.dead_letter_topic {
        Some(to) => Some(DeadLetterTopic::new(&publisher.connection, to)?),
        None => None,
    };
    let decoder = decoder(publisher, observer)?;
    let acks = Arc::new(GroupOffsets {
        shared: membership.shared().clone(),
        topic: topic.clone(),
        id: id.clone(),
        dead_letter_topic,
    });
    let source = Box::new(TopicSource {
        membership,
        queue,
        topic,
        id,
        stray: VecDeque::new(),
        from: From::Queue,
        dry: true,
        start_time: match start_from {
            StartFrom::Time(ms) => Some(ms),
            _ => None,
        },
        fresh: HashMap::new(),
    });
    Ok(Opened { source, acks, decoder })
}

/// The decoder for a publisher's messages, through the connection's schema
/// registry if it has one.
pub fn decoder(publisher: &StreamPublisher, observer: Option<Observer>) -> anyhow::Result<Decoder> {
    let source = &publisher.source;
    let client = match &publisher.connection.schema_registry {
        Some(registry) => {
            Some(RegistryClient::new(registry).with_context(|| format!("the schema registry of {}", publisher.id()))?)
        }
        None => None,
    };
    let writers = |format: &Format, key: bool| -> anyhow::Result<Option<WriterSchemas>> {
        let Some(client) = client.clone() else { return Ok(None) };
        let subject = subject_of(source.subjects, format, &source.topic, key)?;
        let writers = WriterSchemas::new(client, format.clone(), subject, observer.clone());
        Ok(Some(writers.by_record(source.subjects)))
    };
    let key = source.key.key(match &source.key {
        KeyFormat::Decoded(format) => writers(format, true)?,
        _ => None,
    });
    let value = Part::new(source.format.clone(), writers(&source.format, false)?);
    Ok(Decoder::new(value, key, source.headers))
}

/// Where [`TopicSource::take`] reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    /// The worker's queue, which assigned partitions are forwarded to.
    Queue,
    /// Messages that reached the consumer queue, fetched before their
    /// partition was forwarded (the consumer's task hands them over).
    Stray,
}

/// The reading half: one topic, in the connection's shared consumer.
struct TopicSource {
    /// Leaves before the queue goes: nothing is forwarded to it any more.
    membership: Membership,
    queue: MessageQueue,
    topic: String,
    /// The publisher's `collection/name`, for the logs.
    id: String,
    stray: VecDeque<RawMessage>,
    from: From,
    /// Whether the last take from the queue found it empty (librdkafka wakes
    /// the worker only when the queue fills from empty).
    dry: bool,
    /// `kafka.start_from` a time (ms since the epoch), if it is one.
    start_time: Option<i64>,
    /// Partitions assigned where the catalog stored no offset, and the first
    /// offset handed out of each (`None`: none yet; until then, messages
    /// before `start_time` are skipped). A batch of theirs that is dropped
    /// is read again from there, not from wherever `start_from` would start.
    fresh: HashMap<i32, Option<i64>>,
}

impl TopicSource {
    fn event(&mut self, change: Assignment) -> SourceEvent {
        match change {
            Assignment::Assigned(offsets) => {
                for (&partition, offset) in &offsets {
                    match offset {
                        None => self.fresh.insert(partition, None),
                        Some(_) => self.fresh.remove(&partition),
                    };
                }
                SourceEvent::Assigned(offsets)
            }
            Assignment::Revoked(partitions) => {
                self.forget(&partitions);
                SourceEvent::Revoked(partitions)
            }
            Assignment::Refused(reason) => SourceEvent::Refused(reason),
            Assignment::Unreachable(reason) => SourceEvent::Unreachable(reason),
            Assignment::Reachable => SourceEvent::Reachable,
        }
    }

    /// Drops what was taken of `partitions` and not read yet.
    fn forget(&mut self, partitions: &[i32]) {
        self.queue.forget(partitions);
        self.stray.retain(|m| !partitions.contains(&m.partition));
    }
}

impl Source for TopicSource {
    fn ready(&mut self) -> BoxFuture<'_, Ready> {
        Box::pin(async move {
            if let Ok(change) = self.membership.events.try_recv() {
                return Ready::Event(self.event(change));
            }
            while let Ok(message) = self.membership.strays.try_recv() {
                self.stray.push_back(message);
            }
            if !self.stray.is_empty() {
                self.from = From::Stray;
                return Ready::Messages;
            }
            if !self.dry {
                // Reading stopped before the queue ran dry: look again at once.
                self.queue.look_again();
            }
            tokio::select! {
                biased;
                Some(change) = self.membership.events.recv() => Ready::Event(self.event(change)),
                Some(message) = self.membership.strays.recv() => {
                    self.stray.push_back(message);
                    self.from = From::Stray;
                    Ready::Messages
                }
                () = self.queue.ready() => {
                    self.from = From::Queue;
                    Ready::Messages
                }
            }
        })
    }

    fn take(&mut self) -> Option<anyhow::Result<RawMessage>> {
        loop {
            // A change of assignment first: the messages after it may be of partitions it brings.
            if !self.membership.events.is_empty() {
                // Whatever `ready` saw is still there: look again after the change.
                self.dry = false;
                return None;
            }
            let taken = match self.from {
                From::Stray => self.stray.pop_front().map(Ok),
                From::Queue => {
                    let taken = self.queue.next();
                    self.dry = taken.is_none();
                    taken
                }
            };
            if let Some(Ok(m)) = &taken
                && let Some(first @ None) = self.fresh.get_mut(&m.partition)
            {
                if let Some(start) = self.start_time
                    && m.timestamp.is_some_and(|t| t < start)
                {
                    continue;
                }
                *first = Some(m.offset);
            }
            return taken.map(|m| m.with_context(|| format!("consuming topic `{}`", self.topic)));
        }
    }

    fn rewind(&mut self, positions: &BTreeMap<i32, Option<i64>>) {
        self.forget(&positions.keys().copied().collect::<Vec<_>>());
        for (&partition, offset) in positions {
            // Never committed: from the first offset handed out (none yet: from the beginning).
            let first = offset.or_else(|| self.fresh.get(&partition).copied().flatten());
            let position = first.map_or(Offset::Beginning, Offset::Offset);
            let consumer = self.membership.shared().consumer();
            if let Err(e) = consumer.seek(&self.topic, partition, position, Duration::from_secs(10)) {
                tracing::warn!(publisher = %self.id, partition, error = %e, "seeking to read a dropped batch again");
            }
        }
    }
}

/// The acknowledging half: the group's offsets, and the dead-letter topic.
struct GroupOffsets {
    shared: Arc<Shared>,
    topic: String,
    id: String,
    dead_letter_topic: Option<DeadLetterTopic>,
}

impl Acknowledge for GroupOffsets {
    fn dead_letters<'a>(&'a self, dead: &'a [DeadLetter]) -> BoxFuture<'a, anyhow::Result<Vec<DeadLetter>>> {
        Box::pin(async move {
            match &self.dead_letter_topic {
                Some(to) if !dead.is_empty() => to.send(&self.topic, dead).await.map(|()| vec![]).map_err(Into::into),
                Some(_) => Ok(vec![]),
                None => Ok(dead.to_vec()),
            }
        })
    }

    /// Kafka's group offsets follow the catalog's, only so lag tools see progress.
    fn committed(&self, ranges: &[PartitionRange]) {
        let mut tpl = TopicPartitionList::new();
        for r in ranges {
            let _ = tpl.add_partition_offset(&self.topic, r.partition, Offset::Offset(r.last + 1));
        }
        if let Err(e) = self.shared.consumer().commit(&tpl, CommitMode::Async) {
            tracing::warn!(publisher = %self.id, error = %e, "committing group offsets (for lag tools) failed");
        }
    }
}
