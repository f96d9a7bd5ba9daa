//! Rollovers: a batch closes by count, size, time or the flush interval's
//! ceiling, or early under the node's memory budget; the next one is read
//! while the one before commits.

use super::*;

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
