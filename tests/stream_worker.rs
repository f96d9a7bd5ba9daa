//! The stream worker against a real Kafka-protocol broker (librdkafka's mock
//! cluster, in-process): rollovers, dead letters, retries, broker outages,
//! consumer groups, and exactly-once commits. Each test has its own broker.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Headers;
use serde_json::json;
use weir::stream::{WorkerEvent, WorkerExit, WorkerOptions};

use common::stream::{Harness, clicks, publisher};

fn fast_retries() -> WorkerOptions {
    WorkerOptions {
        first_backoff: Duration::from_millis(200),
        max_backoff: Duration::from_secs(1),
        ..WorkerOptions::default()
    }
}

fn assert_exactly_once(h: &Harness, expected: usize) {
    let ids = h.committed_event_ids();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no row is committed twice");
    assert_eq!(ids.len(), expected, "every row is committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_rollover_closes_batches_of_that_many() {
    let h = Harness::new(1);
    h.produce("clicks", &clicks(0, 12)).await;
    let mut w = h.start(
        h.publisher("read-clicks", json!({"kafka.messages_rollover": 5, "kafka.time_rollover_seconds": 600}), None),
        WorkerOptions::default(),
    );
    let first = w.next_commit().await;
    let second = w.next_commit().await;
    for e in [&first, &second] {
        assert_eq!((e.rollover_reason.as_str(), e.rows_in, e.rows_out), ("messages", 5, 5));
    }
    assert_eq!((first.offsets[0].first, first.offsets[0].last, second.offsets[0].first), (0, 4, 5));
    // The last two wait in the open batch (no threshold trips; give the consumer
    // a moment to deliver them), and shutdown commits them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(w.stop().await, WorkerExit::Shutdown);
    let executions = h.catalog.executions("events/read_clicks").unwrap();
    assert_eq!(executions.last().unwrap().rollover_reason, "shutdown");
    assert_eq!(executions.last().unwrap().rows_out, 2);
    assert_exactly_once(&h, 12);
    assert_eq!(h.catalog.offsets("events/read_clicks", "clicks").unwrap()[&0], 12);
    assert!(!h.catalog.data_dir().join("staging").exists(), "a batch committed at its first attempt is never staged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_batch_is_processed_while_the_one_before_commits_and_commits_after_it() {
    let h = Harness::new(1);
    // Already in the topic: each batch of 5 closes as soon as the one before it.
    h.produce("clicks", &clicks(0, 60)).await;
    let mut w = h.start(
        h.publisher("read-clicks", json!({"kafka.messages_rollover": 5, "kafka.time_rollover_seconds": 600}), None),
        WorkerOptions::default(),
    );
    let (mut open, mut most_open, mut commits) = (0, 0, Vec::new());
    while commits.len() < 12 {
        let event = w.next_matching(|e| match e {
            WorkerEvent::Closed { .. } | WorkerEvent::Committed(_) | WorkerEvent::Dropped { .. } => Some(e.clone()),
            _ => None,
        });
        match event.await {
            WorkerEvent::Closed { .. } => {
                open += 1;
                most_open = most_open.max(open);
            }
            WorkerEvent::Committed(e) => {
                open -= 1;
                commits.push(e);
            }
            dropped => panic!("no batch conflicts with the one before it: {dropped:?}"),
        }
    }
    w.stop().await;
    assert_eq!(most_open, 2, "a second batch is processed while the first is in flight, never a third");
    let starts: Vec<i64> = commits.iter().map(|e| e.offsets[0].first).collect();
    assert_eq!(starts, (0..12).map(|i| i * 5).collect::<Vec<_>>(), "committed in offset order");
    assert_exactly_once(&h, 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_rollover_counts_buffered_bytes() {
    let h = Harness::new(1);
    let values = clicks(0, 40);
    let per_message = values[0].len() + "key-0".len();
    h.produce("clicks", &values).await;
    // 0.001 MiB = 1049 bytes: the batch closes on the message that reaches it.
    let mut w = h.start(
        h.publisher("read-clicks", json!({"kafka.size_rollover_mb": 0.001, "kafka.time_rollover_seconds": 600}), None),
        WorkerOptions::default(),
    );
    let e = w.next_commit().await;
    assert_eq!(e.rollover_reason, "size");
    let expected_rows = 1049u64.div_ceil(per_message as u64);
    assert!(
        e.rows_in.abs_diff(expected_rows) <= 1,
        "{} rows of ~{per_message} bytes closed the 1049-byte batch",
        e.rows_in
    );
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_rollover_fires_on_an_idle_topic() {
    let h = Harness::new(2);
    let mut w =
        h.start(h.publisher("read-clicks", json!({"kafka.time_rollover_seconds": 1}), None), WorkerOptions::default());
    h.produce("clicks", &clicks(0, 3)).await;
    // Nothing else arrives: the timer alone must close the batch.
    let e = w.next_commit().await;
    assert_eq!((e.rollover_reason.as_str(), e.rows_out), ("time", 3));
    // An empty buffer never makes a batch: nothing more is committed while idle.
    let more = tokio::time::timeout(Duration::from_secs(3), w.next_commit()).await;
    assert!(more.is_err(), "an empty buffer made a batch: {more:?}");
    w.stop().await;
    assert_eq!(h.catalog.executions("events/read_clicks").unwrap().len(), 1);
}

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

/// A worker whose plugin fails every attempt for 1.5 s, on three messages
/// produced once it reads (so its first attempt comes well before that however
/// long the start took); returned after its first failed attempt, with that event.
async fn failing_for_a_while(h: &Harness) -> (common::stream::RunningWorker, String) {
    let mut w = h.start(h.publisher("fixture-fail-until", json!({"kafka.messages_rollover": 3}), None), fast_retries());
    w.next_matching(|e| matches!(e, WorkerEvent::Assigned(_)).then_some(())).await;
    let not_before = weir::catalog::now_ms() + 1500;
    let values: Vec<String> = (0..3)
        .map(|i| json!({"event_id": format!("evt-{i}"), "user_id": 1, "url": "/", "ts": "2026-11-29T10:00:00Z", "not_before_ms": not_before}).to_string())
        .collect();
    h.produce("clicks", &values).await;
    let failed = w.next_matching(|e| matches!(e, WorkerEvent::AttemptFailed { .. }).then(|| format!("{e:?}"))).await;
    (w, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_plugin_is_retried_and_then_commits_once() {
    let h = Harness::new(1);
    let (mut w, failed) = failing_for_a_while(&h).await;
    assert!(failed.contains("the plugin failed: not before"), "{failed}");
    // The failed attempt staged the batch for the retries before it said so.
    let staged = files_under(&h.catalog.data_dir().join("staging"));
    assert_eq!(staged.len(), 1, "{staged:?}");
    // The retries read the batch back from its staged files: every row and column.
    let e = w.next_commit().await;
    assert_eq!((e.rows_in, e.rows_out), (3, 3));
    w.stop().await;
    let statuses: Vec<String> =
        h.catalog.executions("events/read_clicks").unwrap().into_iter().map(|e| e.status).collect();
    // Each failed attempt is recorded as it fails, as one to be tried again.
    assert!(statuses.len() >= 2 && statuses[..statuses.len() - 1].iter().all(|s| s == "retrying"), "{statuses:?}");
    assert_eq!(statuses.last().unwrap(), "committed");
    assert_exactly_once(&h, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_cannot_read_its_staged_files_reads_the_batch_from_kafka_again() {
    let h = Harness::new(1);
    let (mut w, _) = failing_for_a_while(&h).await;
    // The staged batch goes (a full disk cleaned up, an operator's mistake) before the retry.
    std::fs::remove_dir_all(h.catalog.data_dir().join("staging")).unwrap();
    let dropped = w.next_matching(|e| match e {
        WorkerEvent::Dropped { reason } => Some(reason.clone()),
        _ => None,
    });
    let reason = dropped.await;
    assert!(reason.starts_with("a retry could not read the staged batch back"), "{reason}");
    let e = w.next_commit().await;
    assert_eq!((e.rows_in, e.rows_out), (3, 3));
    w.stop().await;
    assert_exactly_once(&h, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_always_fails_marks_the_publisher_failed_and_commits_nothing() {
    let h = Harness::new(1);
    h.produce("clicks", &clicks(0, 2)).await;
    let options = WorkerOptions { max_attempts: 3, ..fast_retries() };
    let mut w = h.start(h.publisher("hostile-panic", json!({"kafka.messages_rollover": 2}), None), options);
    let exit = tokio::time::timeout(Duration::from_secs(60), &mut w.handle).await.unwrap().unwrap().unwrap();
    let WorkerExit::Failed(error) = exit else { panic!("{exit:?}") };
    assert!(error.starts_with("the plugin panicked: cannot handle a batch of 1 slots"), "{error}");
    let statuses: Vec<String> =
        h.catalog.executions("events/read_clicks").unwrap().into_iter().map(|e| e.status).collect();
    assert_eq!(statuses, ["retrying", "retrying", "failed"]);
    assert!(h.catalog.offsets("events/read_clicks", "clicks").unwrap().is_empty(), "offsets stay where they were");
    assert!(h.catalog.versions("events", "clicks").unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_resumes_by_itself_when_the_broker_comes_back() {
    let h = Harness::new(1);
    let mut w =
        h.start(h.publisher("read-clicks", json!({"kafka.messages_rollover": 5}), None), WorkerOptions::default());
    h.produce("clicks", &clicks(0, 5)).await;
    w.next_commit().await;
    h.broker.broker_down(1).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.broker.broker_up(1).unwrap();
    h.produce("clicks", &clicks(5, 5)).await;
    let e = w.next_commit().await;
    assert_eq!(e.rows_out, 5);
    w.stop().await;
    assert_exactly_once(&h, 10);
}

/// The source itself, step by step: messages announced, then a change (here the
/// broker going away) comes before they are taken. The change is handed over
/// first, and the messages still waiting are announced again after it (they
/// were stranded: librdkafka announces a queue only when it fills from empty).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_announced_before_a_change_of_the_source_are_taken_after_it() {
    use weir::sources::{Ready, SourceEvent};
    let h = Harness::new(1);
    let publisher = h.publisher("read-clicks", json!({}), None);
    let mut source = weir::sources::open(&publisher, h.catalog.clone(), &h.sources, None).unwrap().source;
    let within = |what: &'static str| move |e| panic!("{what} within 30 s: {e}");
    let next = async |source: &mut Box<dyn weir::sources::Source>| {
        tokio::time::timeout(Duration::from_secs(30), source.ready()).await
    };
    loop {
        let ready = next(&mut source).await.unwrap_or_else(within("the assignment"));
        if let Ready::Event(SourceEvent::Assigned(_)) = ready {
            break;
        }
    }
    let mut taken = 0;
    h.produce("clicks", &clicks(0, 5)).await;
    while taken < 5 {
        if let Ready::Messages = next(&mut source).await.unwrap_or_else(within("the first messages")) {
            while let Some(m) = source.take() {
                m.unwrap();
                taken += 1;
            }
        }
    }
    h.produce("clicks", &clicks(5, 5)).await;
    let Ready::Messages = next(&mut source).await.unwrap_or_else(within("the next messages")) else {
        panic!("nothing but messages happened")
    };
    h.broker.broker_down(1).unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(source.take().is_none(), "the unreachable broker is reported before the messages are taken");
    let Ready::Event(SourceEvent::Unreachable(_)) = next(&mut source).await.unwrap() else {
        panic!("the change is handed over first")
    };
    h.broker.broker_up(1).unwrap();
    while taken < 10 {
        if let Ready::Messages = next(&mut source).await.unwrap_or_else(within("the waiting messages")) {
            while let Some(m) = source.take() {
                m.unwrap();
                taken += 1;
            }
        }
    }
    assert_eq!(taken, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_resumes_from_the_catalog_without_loss_or_duplicates() {
    let h = Harness::new(3);
    h.produce("clicks", &clicks(0, 30)).await;
    let mut w =
        h.start(h.publisher("read-clicks", json!({"kafka.messages_rollover": 10}), None), WorkerOptions::default());
    w.commits_until(30).await;
    w.stop().await;
    h.produce("clicks", &clicks(30, 20)).await;
    let mut w =
        h.start(h.publisher("read-clicks", json!({"kafka.messages_rollover": 10}), None), WorkerOptions::default());
    w.commits_until(20).await;
    w.stop().await;
    assert_exactly_once(&h, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_split_partitions_and_survive_a_rebalance() {
    let h = Harness::new(4);
    // The eager assignor, as a connection may choose (`cooperative-sticky` is weir's default):
    // every partition is revoked and assigned again on each rebalance.
    let publisher = || {
        let mut connection = h.connection();
        connection.client_settings.insert("partition.assignment.strategy".into(), "range".into());
        let src_cfg = json!({"kafka.messages_rollover": 5, "kafka.time_rollover_seconds": 1});
        common::stream::publisher(connection, &h.runtime, "read-clicks", "clicks", src_cfg, None)
    };
    let mut a = h.start(publisher(), WorkerOptions::default());
    let mut b = h.start(publisher(), WorkerOptions::default());
    // Both end up owning part of the topic.
    let (pa, pb) = tokio::join!(owned_share(&mut a), owned_share(&mut b));
    assert_eq!(pa + pb, 4, "the partitions are split between the two workers");
    h.produce("clicks", &clicks(0, 40)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // One leaves: the other takes every partition and carries on.
    a.stop().await;
    h.produce("clicks", &clicks(40, 40)).await;
    let wait = async {
        loop {
            if h.committed_event_ids().len() >= 80 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait).await.expect("all 80 rows committed");
    b.stop().await;
    assert_exactly_once(&h, 80);
}

/// Two nodes that both hold every partition (each sees a rebalance its own way;
/// forced here by putting them in two consumer groups) race to commit the
/// same ranges, wave after wave: the catalog's compare-and-set lets one commit
/// each range, the other drops its batch and re-reads from the catalog's
/// offsets, and no row is ever committed twice or lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_holding_the_same_partitions_commit_every_row_once() {
    const WAVES: usize = 5;
    let h = Harness::new(2);
    // Batches close on time alone: both workers buffer a whole wave (they poll
    // every 100 ms) before either closes its batch 2 s after its first message,
    // so every wave is raced for.
    let src_cfg = json!({"kafka.messages_rollover": 100_000, "kafka.time_rollover_seconds": 2});
    let racer = |group: &str| {
        let connection = weir::publisher::source::KafkaConnection { group_id: Some(group.into()), ..h.connection() };
        common::stream::publisher(connection, &h.runtime, "read-clicks", "clicks", src_cfg.clone(), None)
    };
    let mut a = h.start(racer("racer-a"), fast_retries());
    let mut b = h.start(racer("racer-b"), fast_retries());
    for w in [&mut a, &mut b] {
        w.next_matching(|e| matches!(e, WorkerEvent::Assigned(p) if p.len() == 2).then_some(())).await;
    }
    for wave in 0..WAVES {
        h.produce("clicks", &clicks(wave * 40, 40)).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while h.committed_event_ids().len() < (wave + 1) * 40 {
            assert!(tokio::time::Instant::now() < deadline, "wave {wave}: the rows are committed");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The loser's batch closes too, and is dropped, before the next wave.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut dropped = 0;
    for w in [&mut a, &mut b] {
        while let Ok(event) = w.events.try_recv() {
            dropped += usize::from(matches!(event, WorkerEvent::Dropped { .. }));
        }
    }
    a.stop().await;
    b.stop().await;
    assert!(dropped >= WAVES, "every wave was raced for, and lost by one worker: {dropped} dropped");
    assert_exactly_once(&h, WAVES * 40);
}

/// Waits until the worker holds a strict part of the 4 partitions (assignments
/// come and go a few partitions at a time: the cooperative assignor).
async fn owned_share(w: &mut common::stream::RunningWorker) -> usize {
    let mut held = std::collections::BTreeSet::new();
    loop {
        w.next_matching(|e| match e {
            WorkerEvent::Assigned(p) => Some(held.extend(p.keys())),
            WorkerEvent::Revoked(p) => Some(held.retain(|x| !p.contains(x))),
            _ => None,
        })
        .await;
        if !held.is_empty() && held.len() < 4 {
            return held.len();
        }
    }
}

/// Workers of one node that read through one connection share one consumer:
/// each is given only its own topic's partitions, every row lands once in
/// its own table, and one leaving (paused, deleted or failed: its worker
/// stops) takes no partition from the others, which go on committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_one_connection_share_one_consumer_and_one_leaving_disturbs_no_other() {
    const N: usize = 8;
    let h = Harness::new(1);
    let src_cfg = json!({"kafka.messages_rollover": 10, "kafka.time_rollover_seconds": 1});
    let mut workers = Vec::new();
    for i in 0..N {
        let topic = format!("t{i}");
        h.broker.create_topic(&topic, 2).unwrap();
        let mut p = publisher(h.connection(), &h.runtime, "passthrough", &topic, src_cfg.clone(), None);
        p.name = format!("p{i}");
        workers.push(h.start(p, WorkerOptions::default()));
    }
    for w in &mut workers {
        let mut held = std::collections::BTreeSet::<i32>::new();
        while held.len() < 2 {
            w.next_matching(|e| match e {
                WorkerEvent::Assigned(p) => Some(held.extend(p.keys())),
                WorkerEvent::Revoked(p) => panic!("partitions {p:?} revoked while the others joined"),
                _ => None,
            })
            .await;
        }
    }
    assert_eq!(h.sources.kafka.consumers(), 1, "{N} workers on one connection, one consumer");
    let rows = |i: usize| h.committed_event_ids_of(&format!("t{i}"));
    let wait_for = |from: usize, count: usize| {
        let h = &h;
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while (from..N).any(|i| rows(i).len() < count) {
                assert!(tokio::time::Instant::now() < deadline, "every table has {count} rows");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let _ = h;
        }
    };
    for i in 0..N {
        h.produce(&format!("t{i}"), &clicks(i * 1000, 20)).await;
    }
    wait_for(0, 20).await;

    // One leaves: the others keep their partitions and go on.
    let leaving = workers.remove(0);
    assert_eq!(leaving.stop().await, WorkerExit::Shutdown);
    for i in 0..N {
        h.produce(&format!("t{i}"), &clicks(i * 1000 + 20, 20)).await;
    }
    wait_for(1, 40).await;
    for w in &mut workers {
        while let Ok(event) = w.events.try_recv() {
            assert!(!matches!(event, WorkerEvent::Revoked(_)), "a neighbour's partitions were revoked: {event:?}");
        }
    }
    assert_eq!(rows(0).len(), 20, "the one that left commits nothing more");
    for i in 1..N {
        let mut ids = rows(i);
        ids.sort();
        let mut expected: Vec<String> = (i * 1000..i * 1000 + 40).map(|n| format!("evt-{n}")).collect();
        expected.sort();
        assert_eq!(ids, expected, "table t{i}: every row once");
    }
    for w in workers {
        w.stop().await;
    }
    // The consumer is closed once its last worker (and the batch tasks it ended) is gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h.sources.kafka.consumers() > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the consumer is closed after its last worker");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_memory_budget_closes_the_largest_buffer_early() {
    let mut h = Harness::new(1);
    h.budget = std::sync::Arc::new(weir::stream::buffer::MemoryBudget::new(2000));
    h.produce("clicks", &clicks(0, 40)).await;
    // No threshold of its own would close this batch for ten minutes.
    let mut w = h
        .start(h.publisher("read-clicks", json!({"kafka.time_rollover_seconds": 600}), None), WorkerOptions::default());
    let e = w.next_commit().await;
    assert_eq!(e.rollover_reason, "memory-budget");
    assert!(e.rows_in > 0 && e.rows_in < 40, "closed early, at {} rows", e.rows_in);
    // What is left stays under the budget until shutdown commits it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    w.stop().await;
    assert_exactly_once(&h, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_interval_caps_the_time_window() {
    let h = Harness::new(1);
    // time_rollover_seconds says ten minutes; flush_interval_mins = 1 caps the window at 60 s.
    let mut publisher = h.publisher("read-clicks", json!({"kafka.time_rollover_seconds": 600}), None);
    publisher.flush_interval_mins = 1;
    assert_eq!(publisher.rollover().time, Duration::from_secs(60));
    let mut w = h.start(publisher, WorkerOptions::default());
    h.produce("clicks", &clicks(0, 3)).await;
    let sent = std::time::Instant::now();
    let e = w.next_commit().await;
    assert_eq!((e.rollover_reason.as_str(), e.rows_out), ("time", 3));
    assert!(sent.elapsed() >= Duration::from_secs(55), "not before the ceiling");
    w.stop().await;
}

/// The files under `dir`, at any depth.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { files.extend(files_under(&path)) } else { files.push(path) }
    }
    files
}

/// A partition the catalog has never committed starts where the publisher's
/// consumer group left off (a group an earlier consumer committed in), and
/// one the group has no offset for either starts by `kafka.auto_offset_reset`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_new_to_the_catalog_starts_at_the_group_offset_or_by_reset() {
    use rdkafka::consumer::{BaseConsumer, CommitMode};
    use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

    let h = Harness::new(2);
    h.produce("clicks", &clicks(0, 40)).await;
    let bootstrap = h.broker.bootstrap_servers().to_string();
    let group = "an-earlier-consumer";
    let earlier: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).set("group.id", group).create().unwrap();
    let held: Vec<i64> =
        (0..2).map(|p| earlier.fetch_watermarks("clicks", p, Duration::from_secs(10)).unwrap().1).collect();
    assert!(held.iter().all(|&n| n > 5), "both partitions hold messages: {held:?}");
    let mut committed = TopicPartitionList::new();
    committed.add_partition_offset("clicks", 0, Offset::Offset(5)).unwrap();
    earlier.commit(&committed, CommitMode::Sync).unwrap();
    drop(earlier);

    // The group's offset for partition 0; partition 1 by the default reset, from its beginning.
    let connection = weir::publisher::source::KafkaConnection { group_id: Some(group.into()), ..h.connection() };
    let src_cfg = json!({"kafka.time_rollover_seconds": 1});
    let publisher = common::stream::publisher(connection, &h.runtime, "read-clicks", "clicks", src_cfg, None);
    let mut w = h.start(publisher, WorkerOptions::default());
    let expected = (held[0] - 5 + held[1]) as u64;
    let executions = w.commits_until(expected).await;
    let first = |partition: i32| {
        executions.iter().flat_map(|e| &e.offsets).filter(|r| r.partition == partition).map(|r| r.first).min()
    };
    assert_eq!((first(0), first(1)), (Some(5), Some(0)));
    w.stop().await;
    assert_eq!(h.committed_event_ids().len() as u64, expected);

    // A new group reading from the end: what was there before is skipped, what comes after is read.
    let connection =
        weir::publisher::source::KafkaConnection { group_id: Some("a-new-group".into()), ..h.connection() };
    let src_cfg = json!({"kafka.time_rollover_seconds": 1, "kafka.auto_offset_reset": "latest"});
    let h2 = Harness {
        catalog: std::sync::Arc::new(weir::catalog::Catalog::open(&h.dir.path().join("second")).unwrap()),
        ..h
    };
    let publisher = common::stream::publisher(connection, &h2.runtime, "read-clicks", "clicks", src_cfg, None);
    let mut w = h2.start(publisher, WorkerOptions::default());
    w.next_matching(|e| matches!(e, WorkerEvent::Assigned(p) if p.len() == 2).then_some(())).await;
    // Positions at the end are looked up as the partitions start fetching.
    tokio::time::sleep(Duration::from_secs(2)).await;
    h2.produce("clicks", &clicks(100, 10)).await;
    let executions = w.commits_until(10).await;
    assert_eq!(executions.iter().map(|e| e.rows_out).sum::<u64>(), 10);
    for e in &executions {
        for r in &e.offsets {
            assert!(
                r.first >= held[r.partition as usize],
                "partition {} read from {} though it held {} before",
                r.partition,
                r.first,
                held[r.partition as usize]
            );
        }
    }
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_a_publisher_does_not_declare_fails_at_the_first_attempt_said_once() {
    let h = Harness::new(3);
    // read-clicks writes `clicks`; a publisher of topic `views` declares `views`.
    h.broker.create_topic("views", 1).unwrap();
    h.produce("views", &clicks(0, 10)).await;
    let p = publisher(h.connection(), &h.runtime, "read-clicks", "views", json!({"kafka.messages_rollover": 10}), None);
    let mut w = h.start(p, WorkerOptions::default());
    let (attempt, error, retry_in) = w
        .next_matching(|e| match e {
            WorkerEvent::AttemptFailed { attempt, error, retry_in, .. } => Some((*attempt, error.clone(), *retry_in)),
            _ => None,
        })
        .await;
    assert_eq!((attempt, retry_in), (1, None), "no retry: the plugin would return the same: {error}");
    assert_eq!(error.matches("is not one this publisher declares").count(), 1, "said once: {error}");
    let exit = tokio::time::timeout(Duration::from_secs(30), w.handle).await.unwrap().unwrap().unwrap();
    assert!(matches!(&exit, WorkerExit::Failed(e) if e.contains("(declared: views)")), "{exit:?}");
    assert!(h.catalog.offsets("events/read_clicks", "views").unwrap().is_empty(), "nothing committed");
}
