//! Partitions and consumer groups: restarts resume from the catalog, workers
//! split partitions and survive rebalances, workers of a connection share one
//! consumer, and a partition new to the catalog starts at the group's offset.

use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;

use super::*;

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
