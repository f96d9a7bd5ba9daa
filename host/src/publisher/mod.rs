//! A publisher as its owner declares it: the declaration (`declaration`,
//! name, flush interval, output tables, the plugin) and its source's settings
//! (`source`: the topic, format, schema and when a batch closes), which the
//! CLI, the server and the workers all read; and a [`StreamPublisher`], the
//! two resolved with its plugin, as a worker runs it.

pub mod change_log;
pub mod declaration;
pub mod source;

use crate::plugin::{Limits, Plugin};
use crate::tables::partition::Partitioning;
use declaration::table_name_for_topic;
use source::{KafkaConnection, KafkaSource, Rollover};

/// A stream publisher, resolved and ready to run.
#[derive(Clone)]
pub struct StreamPublisher {
    pub collection: String,
    pub name: String,
    pub connection: KafkaConnection,
    pub source: KafkaSource,
    pub flush_interval_mins: u64,
    pub plugin: Plugin,
    pub limits: Limits,
    /// How its output table is partitioned.
    pub partitioning: Partitioning,
    /// Delta, or Iceberg too.
    pub table_format: crate::tables::TableFormat,
}

impl StreamPublisher {
    /// `collection/name`, the publisher's identity in the catalog.
    pub fn id(&self) -> String {
        format!("{}/{}", self.collection, self.name)
    }

    /// What its positions are kept under in the catalog, and what its plugin
    /// sees as the slot's source: the topic.
    pub fn source_name(&self) -> &str {
        &self.source.topic
    }

    /// The output table is named after the topic.
    pub fn output_table(&self) -> String {
        table_name_for_topic(&self.source.topic)
    }

    /// The consumer group: the connection's, by default `weir.<collection>`,
    /// which every node's consumer of the collection joins, for all its
    /// publishers' topics (a topic has one publisher in a collection).
    pub fn group_id(&self) -> String {
        self.connection.group_id.clone().unwrap_or_else(|| format!("weir.{}", self.collection))
    }

    pub fn rollover(&self) -> Rollover {
        self.source.config.rollover(self.flush_interval_mins)
    }
}
