//! Messages that fail to decode: dead letters in the catalog or on a topic,
//! in offset order among the rows.

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Headers;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_become_dead_letters_in_the_catalog() {
    let h = Harness::new(1);
    let mut values = clicks(0, 4);
    values.insert(1, "not json".into());
    values.insert(
        3,
        json!({"event_id": "evt-x", "user_id": "seven", "url": "/", "ts": "2026-11-29T10:00:00Z"}).to_string(),
    );
    h.produce("clicks", &values).await;
    let mut w =
        h.start(h.publisher("read-clicks", json!({"kafka.messages_rollover": 6}), None), WorkerOptions::default());
    let e = w.next_commit().await;
    assert_eq!((e.rows_in, e.rows_out, e.dead_letters), (4, 4, 2));
    w.stop().await;
    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    assert_eq!(dead.iter().map(|d| d.offset).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(dead[0].value.as_deref(), Some(b"not json".as_slice()));
    assert_eq!(dead[0].key.as_deref(), Some(b"key-1".as_slice()));
    assert_eq!(dead[0].headers, [("source".to_string(), Some(b"test".to_vec()))]);
    assert!(dead[1].error.contains("not valid JSON for the schema"), "{}", dead[1].error);
    assert_exactly_once(&h, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_several_decoded_runs_keeps_every_row_and_dead_letter_in_offset_order() {
    // About 2 MB a partition: each decodes in ~1 MiB runs while the batch fills, and the rest at the close.
    let h = Harness::new(2);
    let long_url = format!("/docs/{}", "x".repeat(300));
    let bad = [10, 4000, 6001, 11_990];
    let values: Vec<String> = (0..12_000)
        .map(|i| match i {
            10 | 6001 => "not json".to_string(),
            4000 | 11_990 => {
                json!({"event_id": format!("evt-{i}"), "user_id": "x", "url": "/", "ts": "2026-11-29T10:00:00Z"})
                    .to_string()
            }
            _ => json!({"event_id": format!("evt-{i}"), "user_id": i, "url": long_url, "ts": "2026-11-29T10:00:00Z"})
                .to_string(),
        })
        .collect();
    h.produce("clicks", &values).await;
    let mut w = h.start(
        h.publisher(
            "read-clicks",
            json!({"kafka.messages_rollover": 12_000, "kafka.time_rollover_seconds": 600}),
            None,
        ),
        WorkerOptions::default(),
    );
    let e = w.next_commit().await;
    assert_eq!((e.rollover_reason.as_str(), e.rows_in, e.rows_out, e.dead_letters), ("messages", 11_996, 11_996, 4));
    // Every partition held well over a run's worth: at least one run went to the decoder before the close.
    let smallest = values.iter().map(String::len).filter(|n| *n > long_url.len()).min().unwrap() as u64;
    for r in &e.offsets {
        let held = (r.last - r.first + 1) as u64 * smallest;
        assert!(
            held > weir::stream::buffer::DECODE_RUN_BYTES + 10_000,
            "partition {} held only {held} bytes",
            r.partition
        );
    }
    w.stop().await;
    assert_exactly_once(&h, 11_996);
    // Rows keep each partition's offset order across runs.
    let frame =
        weir::input::read(&h.dir.path().join(&h.catalog.versions("events", "clicks").unwrap()[0].files[0].path), None);
    for batch in frame.unwrap().batches {
        use arrow::array::AsArray;
        let (p, o) = (batch.column_by_name("_partition").unwrap(), batch.column_by_name("_offset").unwrap());
        let (p, o) = (p.as_primitive::<arrow::datatypes::Int32Type>(), o.as_primitive::<arrow::datatypes::Int64Type>());
        for i in 1..batch.num_rows() {
            assert!(p.value(i) != p.value(i - 1) || o.value(i) > o.value(i - 1), "row {i} is out of offset order");
        }
    }
    let dead = h.catalog.dead_letters("events/read_clicks").unwrap();
    let mut dead_values: Vec<String> =
        dead.iter().map(|d| String::from_utf8(d.value.clone().unwrap()).unwrap()).collect();
    dead_values.sort();
    let mut expected: Vec<String> = bad.iter().map(|i| values[*i].clone()).collect();
    expected.sort();
    assert_eq!(dead_values, expected);
    let coordinates: Vec<(i32, i64)> = dead.iter().map(|d| (d.partition, d.offset)).collect();
    assert!(coordinates.is_sorted(), "dead letters in partition and offset order: {coordinates:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_go_to_the_dead_letter_topic_with_their_coordinates() {
    let h = Harness::new(1);
    h.broker.create_topic("clicks.dlq", 1).unwrap();
    let mut values = clicks(0, 3);
    values.push("{\"truncated\": ".into());
    h.produce("clicks", &values).await;
    let mut w = h.start(
        h.publisher("read-clicks", json!({"kafka.messages_rollover": 4}), Some("clicks.dlq")),
        WorkerOptions::default(),
    );
    let e = w.next_commit().await;
    assert_eq!((e.rows_out, e.dead_letters), (3, 1));
    w.stop().await;
    assert!(h.catalog.dead_letters("events/read_clicks").unwrap().is_empty(), "they went to the topic instead");

    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", h.broker.bootstrap_servers())
        .set("group.id", "dlq-reader")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["clicks.dlq"]).unwrap();
    let letter = tokio::time::timeout(Duration::from_secs(30), consumer.recv()).await.unwrap().unwrap();
    assert_eq!(letter.payload(), Some(b"{\"truncated\": ".as_slice()));
    assert_eq!(letter.key(), Some(b"key-3".as_slice()));
    let headers: Vec<(String, String)> = letter
        .headers()
        .unwrap()
        .iter()
        .map(|h| (h.key.to_string(), String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned()))
        .collect();
    let get = |k: &str| headers.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(get("source"), Some("test"), "the original headers are kept");
    assert_eq!(get("weir.source.topic"), Some("clicks"));
    assert_eq!(get("weir.source.partition"), Some("0"));
    assert_eq!(get("weir.source.offset"), Some("3"));
    assert!(get("weir.source.timestamp").is_some());
    let error = get("weir.error").unwrap();
    assert!(error.starts_with("the value is not a complete JSON document (EOF while parsing"), "{error}");
}
