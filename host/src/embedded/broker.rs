//! An in-process Kafka broker: librdkafka's mock cluster, which speaks the
//! real Kafka protocol on a loopback port while this process lives. `weir demo`
//! runs on it, and so do the hermetic tests. (rdkafka's own `MockCluster`
//! wrapper cannot set the group rebalance delay, which costs 3 s per join, so
//! the few calls needed are made here.)

use std::ffi::{CStr, CString};

use anyhow::{Context as _, bail};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka_sys as sys;

pub struct EmbeddedBroker {
    cluster: *mut sys::rd_kafka_mock_cluster_t,
    bootstrap: String,
    /// The client handle that owns the cluster; dropped after it.
    _owner: BaseProducer,
}

// SAFETY: librdkafka's mock cluster API is thread-safe (each call posts to the
// cluster's own thread); the raw pointer is only used through it.
unsafe impl Send for EmbeddedBroker {}
unsafe impl Sync for EmbeddedBroker {}

impl EmbeddedBroker {
    /// Starts a cluster of `brokers` brokers on loopback ports.
    pub fn start(brokers: i32) -> anyhow::Result<Self> {
        let owner: BaseProducer =
            ClientConfig::new().create().context("creating the client that hosts the embedded broker")?;
        // SAFETY: `owner` outlives the cluster (see Drop); the pointer it returns is checked.
        let cluster = unsafe { sys::rd_kafka_mock_cluster_new(owner.client().native_ptr(), brokers) };
        if cluster.is_null() {
            bail!("librdkafka could not start the embedded broker");
        }
        // SAFETY: `cluster` is live; the string it returns lives as long as the cluster.
        let bootstrap =
            unsafe { CStr::from_ptr(sys::rd_kafka_mock_cluster_bootstraps(cluster)) }.to_string_lossy().into_owned();
        // Groups form at once instead of after the broker's 3 s initial delay.
        unsafe { sys::rd_kafka_mock_group_initial_rebalance_delay_ms(cluster, 0) };
        Ok(Self { cluster, bootstrap, _owner: owner })
    }

    /// `host:port,...` for `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    pub fn create_topic(&self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        let name = CString::new(topic)?;
        // SAFETY: live cluster, valid C string.
        let err = unsafe { sys::rd_kafka_mock_topic_create(self.cluster, name.as_ptr(), partitions, 1) };
        check(err).with_context(|| format!("creating topic {topic}"))
    }

    /// Takes a broker down (connections refused) until [`EmbeddedBroker::broker_up`].
    pub fn broker_down(&self, broker_id: i32) -> anyhow::Result<()> {
        // SAFETY: live cluster.
        check(unsafe { sys::rd_kafka_mock_broker_set_down(self.cluster, broker_id) })
    }

    pub fn broker_up(&self, broker_id: i32) -> anyhow::Result<()> {
        // SAFETY: live cluster.
        check(unsafe { sys::rd_kafka_mock_broker_set_up(self.cluster, broker_id) })
    }
}

fn check(err: sys::rd_kafka_resp_err_t) -> anyhow::Result<()> {
    if err == sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        bail!("embedded broker: {}", rdkafka::error::RDKafkaErrorCode::from(err))
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        // Flush nothing: the owner produced nothing. Destroy the cluster before its owner goes.
        let _ = self._owner.flush(std::time::Duration::ZERO);
        // SAFETY: created in `start`, destroyed once.
        unsafe { sys::rd_kafka_mock_cluster_destroy(self.cluster) };
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, ThreadedProducer};
    use rdkafka::{Message as _, Offset, TopicPartitionList};

    use super::*;

    /// A fetch waiting at the broker for data is answered when data arrives,
    /// as Kafka does, not at the end of its wait (librdkafka's mock cluster
    /// held it for all of `fetch.wait.max.ms`; see vendor/rdkafka-sys/WEIR.md).
    #[test]
    fn a_waiting_fetch_is_answered_when_a_message_arrives() {
        const WAIT: Duration = Duration::from_secs(30);
        let broker = EmbeddedBroker::start(1).unwrap();
        broker.create_topic("quiet", 1).unwrap();
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap_servers())
            .set("group.id", "waits")
            .set("fetch.wait.max.ms", WAIT.as_millis().to_string())
            .set("socket.timeout.ms", (2 * WAIT).as_millis().to_string())
            .create()
            .unwrap();
        let mut partitions = TopicPartitionList::new();
        partitions.add_partition_offset("quiet", 0, Offset::Beginning).unwrap();
        consumer.assign(&partitions).unwrap();
        // Long enough for the consumer's first fetch to find nothing and wait.
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_secs(2) {
            assert!(consumer.poll(Duration::from_millis(100)).is_none());
        }

        let producer: ThreadedProducer<DefaultProducerContext> =
            ClientConfig::new().set("bootstrap.servers", broker.bootstrap_servers()).create().unwrap();
        let sent = Instant::now();
        producer.send(BaseRecord::<(), _>::to("quiet").payload("hello")).map_err(|(e, _)| e).unwrap();
        producer.flush(Duration::from_secs(10)).unwrap();
        let message = loop {
            assert!(sent.elapsed() < WAIT / 2, "the message waited out the consumer's fetch");
            if let Some(message) = consumer.poll(Duration::from_millis(100)) {
                break message.unwrap().detach();
            }
        };
        assert_eq!(message.payload(), Some(&b"hello"[..]));
    }
}
