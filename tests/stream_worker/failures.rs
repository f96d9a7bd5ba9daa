//! Failures: a plugin that fails for a while or for good, a plugin's output
//! the publisher did not declare, a broker that goes away.

use super::*;

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

/// The files under `dir`, at any depth.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { files.extend(files_under(&path)) } else { files.push(path) }
    }
    files
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
