//! A stream harness: an embedded broker (librdkafka's mock cluster, the real
//! protocol on a loopback port), a data directory, and workers to run in it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use weir::catalog::{Catalog, Execution};
use weir::embedded::broker::EmbeddedBroker;
use weir::formats::{DataFormat, Format};
use weir::plugin::{Limits, Runtime};
use weir::publisher::StreamPublisher;
use weir::publisher::source::{KafkaConnection, KafkaSource, SourceConfig};
use weir::stream::buffer::MemoryBudget;
use weir::stream::worker;
use weir::stream::{Node, WorkerEvent, WorkerExit, WorkerOptions};

pub const CLICKS_SCHEMA: &str = include_str!("../../guest-examples/data/clicks.json");

/// One broker, one data directory, one plugin runtime.
pub struct Harness {
    pub broker: EmbeddedBroker,
    pub dir: tempfile::TempDir,
    pub catalog: Arc<Catalog>,
    pub runtime: Arc<Runtime>,
    pub budget: Arc<MemoryBudget>,
    /// What the workers started here share, as one node's do.
    pub sources: Arc<weir::sources::Shared>,
}

impl Harness {
    /// A fresh broker with topic `clicks` of `partitions` partitions.
    pub fn new(partitions: i32) -> Self {
        let broker = EmbeddedBroker::start(1).expect("embedded broker");
        broker.create_topic("clicks", partitions).expect("topic");
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Arc::new(Catalog::open(dir.path()).expect("catalog"));
        Self {
            broker,
            dir,
            catalog,
            runtime: Arc::new(super::runtime()),
            budget: Arc::new(MemoryBudget::new(1 << 30)),
            sources: Default::default(),
        }
    }

    pub fn connection(&self) -> KafkaConnection {
        KafkaConnection {
            bootstrap_servers: self.broker.bootstrap_servers().to_string(),
            // Fast group joins and failure detection, for tests.
            client_settings: [
                ("session.timeout.ms".to_string(), "6000".to_string()),
                ("heartbeat.interval.ms".to_string(), "500".to_string()),
            ]
            .into(),
            ..KafkaConnection::default()
        }
    }

    /// The `events/read_clicks` publisher of topic `clicks` with `src_cfg`, running `plugin`.
    pub fn publisher(&self, plugin: &str, src_cfg: Value, dead_letter_topic: Option<&str>) -> StreamPublisher {
        publisher(self.connection(), &self.runtime, plugin, "clicks", src_cfg, dead_letter_topic)
    }

    pub fn node(&self) -> Node {
        Node {
            catalog: self.catalog.clone(),
            runtime: self.runtime.clone(),
            budget: self.budget.clone(),
            sources: self.sources.clone(),
        }
    }

    pub fn start(&self, publisher: StreamPublisher, options: WorkerOptions) -> RunningWorker {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (stop, shutdown) = watch::channel(false);
        let handle = tokio::spawn(worker::run(publisher, self.node(), options, Some(events_tx), shutdown));
        RunningWorker { events, stop, handle }
    }

    /// Produces JSON values to `topic` (keyed, so they spread over partitions), waiting for acknowledgement.
    pub async fn produce(&self, topic: &str, values: &[String]) {
        produce(self.broker.bootstrap_servers(), topic, values).await
    }

    /// The parquet files of every committed version of `events/clicks`.
    pub fn committed_files(&self) -> Vec<std::path::PathBuf> {
        self.committed_files_of("clicks")
    }

    /// The parquet files of every committed version of `events/<table>`.
    pub fn committed_files_of(&self, table: &str) -> Vec<std::path::PathBuf> {
        let versions = self.catalog.versions("events", table).expect("versions");
        versions.into_iter().flat_map(|v| v.files).map(|f| self.dir.path().join(f.path)).collect()
    }

    /// Every committed row's `event_id`, read back from the parquet files of every version.
    pub fn committed_event_ids(&self) -> Vec<String> {
        self.committed_event_ids_of("clicks")
    }

    /// The same, of `events/<table>`.
    pub fn committed_event_ids_of(&self, table: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for file in self.committed_files_of(table) {
            let frame = weir::input::read(&file, None).expect("read parquet");
            for batch in frame.batches {
                let col = batch.column_by_name("event_id").expect("event_id");
                let col = col.as_any().downcast_ref::<arrow::array::StringArray>().expect("utf8");
                ids.extend(col.iter().flatten().map(str::to_string));
            }
        }
        ids
    }
}

/// The `events/read_clicks` publisher of `topic` (clicks), read through `connection`, running `plugin`.
pub fn publisher(
    connection: KafkaConnection,
    runtime: &Runtime,
    plugin: &str,
    topic: &str,
    src_cfg: Value,
    dead_letter_topic: Option<&str>,
) -> StreamPublisher {
    let mut schema = CLICKS_SCHEMA.to_string();
    if plugin == "fixture-fail-until" {
        schema = schema.replace(
            r#""device": { "type": "string" }"#,
            r#""device": { "type": "string" }, "not_before_ms": { "type": "integer" }"#,
        );
    }
    let format = Format::parse(DataFormat::Json, &schema, None).expect("schema");
    publisher_with(connection, runtime, plugin, topic, format, src_cfg, dead_letter_topic)
}

/// The `events/read_clicks` publisher of `topic`, whose messages are `format`.
pub fn publisher_with(
    connection: KafkaConnection,
    runtime: &Runtime,
    plugin: &str,
    topic: &str,
    format: Format,
    src_cfg: Value,
    dead_letter_topic: Option<&str>,
) -> StreamPublisher {
    let src_cfg: BTreeMap<String, Value> = serde_json::from_value(src_cfg).expect("src_cfg object");
    StreamPublisher {
        collection: "events".into(),
        name: "read_clicks".into(),
        connection,
        source: KafkaSource {
            dead_letter_topic: dead_letter_topic.map(str::to_string),
            ..KafkaSource::new(topic, format, SourceConfig::parse(&src_cfg).expect("src_cfg"))
        },
        flush_interval_mins: 60,
        plugin: runtime.load(&super::guest(plugin)).expect("plugin"),
        limits: Limits::default(),
        partitioning: Default::default(),
        table_format: Default::default(),
    }
}

/// Produces JSON values to `topic` (keyed, so they spread over partitions), waiting for acknowledgement.
pub async fn produce(bootstrap: &str, topic: &str, values: &[String]) {
    let values: Vec<Vec<u8>> = values.iter().map(|v| v.as_bytes().to_vec()).collect();
    produce_bytes(bootstrap, topic, &values).await
}

/// Produces values to `topic` (keyed `key-<i>`), waiting for acknowledgement.
pub async fn produce_bytes(bootstrap: &str, topic: &str, values: &[Vec<u8>]) {
    produce_with(&[("bootstrap.servers", bootstrap)], topic, values).await
}

/// The same, with the producer's librdkafka settings (TLS, SASL, …).
pub async fn produce_with(settings: &[(&str, &str)], topic: &str, values: &[Vec<u8>]) {
    let mut config = ClientConfig::new();
    for (k, v) in settings {
        config.set(*k, *v);
    }
    let producer: FutureProducer = config.create().expect("producer");
    let mut deliveries = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let key = format!("key-{i}");
        let headers = OwnedHeaders::new().insert(Header { key: "source", value: Some(b"test".as_slice()) });
        deliveries.push(
            producer
                .send_result(FutureRecord::to(topic).key(&key).payload(value).headers(headers))
                .map_err(|(e, _)| e)
                .expect("enqueue"),
        );
    }
    for d in deliveries {
        d.await.expect("delivery").map_err(|(e, _)| e).expect("acknowledged");
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
}

pub fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("producer")
}

/// `n` valid click events, ids `evt-{start}`...
pub fn clicks(start: usize, n: usize) -> Vec<String> {
    (start..start + n)
        .map(|i| {
            serde_json::json!({"event_id": format!("evt-{i}"), "user_id": i % 50, "url": "/docs", "ts": "2026-11-29T10:00:00Z", "duration_ms": i})
                .to_string()
        })
        .collect()
}

pub struct RunningWorker {
    pub events: mpsc::UnboundedReceiver<WorkerEvent>,
    pub stop: watch::Sender<bool>,
    pub handle: JoinHandle<anyhow::Result<WorkerExit>>,
}

impl RunningWorker {
    /// Waits (at most 120 s) for the next commit, skipping other events.
    pub async fn next_commit(&mut self) -> Execution {
        self.next_matching(|e| match e {
            WorkerEvent::Committed(exec) => Some(exec.clone()),
            _ => None,
        })
        .await
    }

    /// Waits (at most 120 s) for an event `pick` accepts.
    pub async fn next_matching<T>(&mut self, mut pick: impl FnMut(&WorkerEvent) -> Option<T>) -> T {
        let wait = async {
            loop {
                let event = self.events.recv().await.expect("the worker is running");
                if let Some(found) = pick(&event) {
                    return found;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(120), wait).await.expect("the expected event within 120 s")
    }

    /// Commits until `rows + dead letters` reach `total`; returns the executions.
    pub async fn commits_until(&mut self, total: u64) -> Vec<Execution> {
        let mut seen = 0;
        let mut out = Vec::new();
        while seen < total {
            let e = self.next_commit().await;
            seen += e.rows_out + e.dead_letters;
            out.push(e);
        }
        out
    }

    pub async fn stop(self) -> WorkerExit {
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .expect("stops within 60 s")
            .expect("task")
            .expect("worker")
    }
}
