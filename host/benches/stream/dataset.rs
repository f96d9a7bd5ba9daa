//! The fixed click-event dataset: generated the same way every run, about
//! 200 bytes a message, produced once before anything is timed.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// What the embedded broker holds without dropping segments (5 MB per partition, 6 partitions).
pub const EMBEDDED_CAPACITY: usize = 140_000;
pub const PARTITIONS: i32 = 6;

const URLS: [&str; 4] =
    ["/docs/quickstart/install-on-linux", "/pricing/enterprise", "/blog/weir-0-1-released", "/signup"];
const COUNTRIES: [&str; 5] = ["DE", "US", "FR", "IN", "BR"];
const DEVICES: [&str; 3] = ["desktop", "mobile", "tablet"];

/// Message `i` of the dataset (key, value).
pub fn message(i: usize) -> (String, String) {
    let value = serde_json::json!({
        "event_id": format!("evt-{i:010}"),
        "user_id": i % 9973,
        "url": URLS[i % URLS.len()],
        "referrer": if i % 3 == 0 { serde_json::Value::Null } else { "search-engine".into() },
        "ts": format!("2026-11-29T10:{:02}:{:02}.{:03}Z", (i / 60_000) % 60, (i / 1000) % 60, i % 1000),
        "duration_ms": i % 30_000,
        "country": COUNTRIES[i % COUNTRIES.len()],
        "device": DEVICES[i % DEVICES.len()],
    });
    ((i % 9973).to_string(), value.to_string())
}

pub fn producer(
    bootstrap: &str,
    settings: &[(&str, &str)],
    linger_ms: &str,
) -> ThreadedProducer<DefaultProducerContext> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", linger_ms)
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "1048576");
    for (k, v) in settings {
        if !k.starts_with("session") && !k.starts_with("heartbeat") {
            config.set(*k, *v);
        }
    }
    config.create().expect("producer")
}

/// Produces messages `0..n` to `topic` as JSON values; returns the bytes of keys and values.
pub fn produce(bootstrap: &str, settings: &[(&str, &str)], topic: &str, n: usize) -> u64 {
    produce_encoded(bootstrap, settings, topic, n, |values| values.into_iter().map(String::into_bytes).collect())
}

/// The same messages as Avro, framed for the registry's schema `id` (the
/// click schema of `guest-examples/data/clicks.avsc`).
pub fn produce_avro(bootstrap: &str, settings: &[(&str, &str)], topic: &str, n: usize, id: u32) -> u64 {
    let format = avro_format();
    produce_encoded(bootstrap, settings, topic, n, |values| {
        weir::formats::encode_json_values(&format, &values, Some(id)).unwrap()
    })
}

pub const CLICKS_AVRO: &str = include_str!("../../../guest-examples/data/clicks.avsc");

pub fn avro_format() -> weir::formats::Format {
    weir::formats::Format::parse(weir::formats::DataFormat::Avro, CLICKS_AVRO, None).unwrap()
}

fn produce_encoded(
    bootstrap: &str,
    settings: &[(&str, &str)],
    topic: &str,
    n: usize,
    encode: impl Fn(Vec<String>) -> Vec<Vec<u8>>,
) -> u64 {
    const CHUNK: usize = 8192;
    let producer = producer(bootstrap, settings, "20");
    let mut bytes = 0;
    for start in (0..n).step_by(CHUNK) {
        let (keys, values): (Vec<String>, Vec<String>) = (start..(start + CHUNK).min(n)).map(message).unzip();
        for (key, value) in keys.iter().zip(encode(values)) {
            bytes += (key.len() + value.len()) as u64;
            let mut record = BaseRecord::to(topic).key(key).payload(&value);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, r)) => {
                        record = r;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
    }
    producer.flush(Duration::from_secs(300)).expect("flush");
    bytes
}

/// How many messages the topic holds now.
pub fn held(bootstrap: &str, topic: &str) -> usize {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    (0..PARTITIONS)
        .map(|p| {
            consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).map(|(lo, hi)| (hi - lo) as usize).unwrap_or(0)
        })
        .sum()
}
