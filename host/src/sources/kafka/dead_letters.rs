//! Dead letters: messages that could not be decoded. With a dead-letter topic
//! they are produced there, with their original key, value and headers plus
//! headers saying why and where from, and acknowledged before the offsets past
//! them are committed. Without one they are kept in the catalog, in the same
//! transaction as the batch.
//!
//! Delivery to the topic is at-least-once: a crash between producing and the
//! catalog commit produces the same letters again after the restart. Every
//! letter carries its source coordinates (`weir.source.*` headers), so readers
//! can drop the repeats.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::formats::DeadLetter;
use crate::publisher::source::KafkaConnection;

/// How long a dead letter may take to be acknowledged before the batch fails (and is retried).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct DeadLetterTopic {
    producer: FutureProducer,
    topic: String,
}

#[derive(Debug, thiserror::Error)]
#[error("producing dead letters to `{topic}` failed: {reason}")]
pub struct DeadLetterError {
    pub topic: String,
    pub reason: String,
}

impl DeadLetterTopic {
    pub fn new(connection: &KafkaConnection, topic: &str) -> Result<Self, DeadLetterError> {
        let mut config = ClientConfig::new();
        for (k, v) in connection.client_config() {
            config.set(k, v);
        }
        config.set("enable.idempotence", "true").set("acks", "all");
        let producer = config.create().map_err(|e| DeadLetterError { topic: topic.into(), reason: e.to_string() })?;
        Ok(Self { producer, topic: topic.to_string() })
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Produces every letter and waits until each is acknowledged.
    pub async fn send(&self, source_topic: &str, letters: &[DeadLetter]) -> Result<(), DeadLetterError> {
        let fail = |reason: String| DeadLetterError { topic: self.topic.clone(), reason };
        let mut deliveries = Vec::with_capacity(letters.len());
        for letter in letters {
            let m = &letter.message;
            let (partition, offset) = (m.partition.to_string(), m.offset.to_string());
            let timestamp = m.timestamp.map(|t| t.to_string());
            let mut headers = OwnedHeaders::new_with_capacity(m.headers.len() + 5);
            for (key, value) in &m.headers {
                headers = headers.insert(Header { key, value: value.as_deref() });
            }
            headers = headers
                .insert(Header { key: "weir.error", value: Some(letter.error.as_bytes()) })
                .insert(Header { key: "weir.source.topic", value: Some(source_topic.as_bytes()) })
                .insert(Header { key: "weir.source.partition", value: Some(partition.as_bytes()) })
                .insert(Header { key: "weir.source.offset", value: Some(offset.as_bytes()) });
            if let Some(ts) = &timestamp {
                headers = headers.insert(Header { key: "weir.source.timestamp", value: Some(ts.as_bytes()) });
            }
            let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&self.topic).headers(headers);
            if let Some(key) = m.key() {
                record = record.key(key);
            }
            if let Some(value) = m.payload() {
                record = record.payload(value);
            }
            if let Some(ts) = m.timestamp {
                record = record.timestamp(ts);
            }
            // A full producer queue is backpressure, not an error: wait for room.
            loop {
                match self.producer.send_result(record) {
                    Ok(delivery) => {
                        deliveries.push(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned)) => {
                        record = returned;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err((e, _)) => return Err(fail(e.to_string())),
                }
            }
        }
        for delivery in deliveries {
            match tokio::time::timeout(DELIVERY_TIMEOUT, delivery).await {
                Ok(Ok(Ok(_))) => {}
                Ok(Ok(Err((e, _)))) => return Err(fail(e.to_string())),
                Ok(Err(_)) => return Err(fail("the producer went away before acknowledging".into())),
                Err(_) => return Err(fail(format!("not acknowledged within {DELIVERY_TIMEOUT:?}"))),
            }
        }
        Ok(())
    }
}
