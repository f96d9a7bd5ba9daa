//! What a stream worker reads from, behind one interface: a [`Source`] the
//! worker's loop reads messages and assignments from, and its [`Acknowledge`]
//! half the batches in flight tell what they committed. One module per kind
//! of source: `kafka` (its consumer group, message queue, offsets and
//! dead-letter topic) today.
//!
//! A source's positions are the catalog's: a partition's next offset is
//! committed with each table version, in one catalog transaction, and a
//! source positions what it is given at the catalog's offsets. What the
//! source keeps of its own (Kafka's group offsets) follows the catalog, for
//! tools that read it, and is never read back where the catalog has one.

pub mod kafka;
pub mod postgres;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::catalog::{Catalog, PartitionRange};
use crate::formats::writers::Observer;
use crate::formats::{DeadLetter, Decoder, RawMessage};
use crate::publisher::StreamPublisher;

/// What woke the worker.
#[derive(Debug)]
pub enum Ready {
    /// Messages to read: [`Source::take`] them until it returns `None`.
    Messages,
    /// A change in what the worker owns, or in whether the source takes it.
    Event(SourceEvent),
}

/// A change in the partitions a worker owns, or in whether the source takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEvent {
    /// Newly this worker's, positioned at the catalog's offsets (`None`: the
    /// catalog has none, and the source starts where its own settings say).
    Assigned(BTreeMap<i32, Option<i64>>),
    /// No longer this worker's. What the source had taken of them is dropped
    /// already; what the worker buffered of them is not committed, so not
    /// lost: whoever gets them reads them again from the catalog's offsets.
    Revoked(Vec<i32>),
    /// The source refused this worker (credentials, mechanism, TLS): nothing
    /// is read until it takes it, and the reason says what to fix.
    Refused(String),
    /// The source cannot be reached (every broker connection is down), for
    /// this reason: nothing is read, nothing is lost, and the source keeps trying.
    Unreachable(String),
    /// It answers again after [`SourceEvent::Unreachable`].
    Reachable,
}

/// The reading half of a source, owned by the worker's loop.
pub trait Source: Send {
    /// Resolves when there may be messages to take, or with the next event.
    fn ready(&mut self) -> BoxFuture<'_, Ready>;

    /// The next message, in each partition's offset order; `None` once there
    /// are none for now. An error is the source's, reported and read past
    /// (the source reconnects by itself).
    fn take(&mut self) -> Option<anyhow::Result<RawMessage>>;

    /// Reads these partitions again from these offsets (`None`: from their
    /// start), dropping what was taken of them: a batch of theirs was dropped.
    fn rewind(&mut self, positions: &BTreeMap<i32, Option<i64>>);
}

/// The half of a source that committed batches report to, shared with them.
pub trait Acknowledge: Send + Sync {
    /// Hands a batch's dead letters to the source, if it keeps them itself
    /// (Kafka: a dead-letter topic), acknowledged before the batch commits;
    /// returns those the catalog is to keep with the batch.
    fn dead_letters<'a>(&'a self, dead: &'a [DeadLetter]) -> BoxFuture<'a, anyhow::Result<Vec<DeadLetter>>>;

    /// Tells the source the catalog committed these ranges (Kafka: the
    /// group's offsets, for lag tools). Best effort: the catalog has them.
    fn committed(&self, ranges: &[PartitionRange]);
}

/// A publisher's source, opened for its worker.
pub struct Opened {
    pub source: Box<dyn Source>,
    pub acks: Arc<dyn Acknowledge>,
    /// Decodes the source's messages into the publisher's rows.
    pub decoder: Decoder,
}

/// What a node's workers share of their sources: Kafka consumers, one per
/// connection and consumer group (see `kafka::Pool`).
#[derive(Default)]
pub struct Shared {
    pub kafka: kafka::Pool,
}

/// Opens a publisher's source, sharing what it can with the node's other
/// workers: it starts taking the partitions it is given at the catalog's offsets.
pub fn open(
    publisher: &StreamPublisher,
    catalog: Arc<Catalog>,
    shared: &Shared,
    observer: Option<Observer>,
) -> anyhow::Result<Opened> {
    kafka::open(publisher, catalog, &shared.kafka, observer)
}

/// The decoder for a publisher's messages (with its source's schema registry,
/// if it has one); `observer` hears what the registry does.
pub fn decoder(publisher: &StreamPublisher, observer: Option<Observer>) -> anyhow::Result<Decoder> {
    kafka::decoder(publisher, observer)
}
