//! The runs, each on the same broker and the same data.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, RecordBatch, TimestampMicrosecondArray};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka_sys as rdsys;
use tokio::sync::{mpsc, watch};

use weir::catalog::{Catalog, Timings};
use weir::cpu_time;
use weir::embedded::registry::EmbeddedRegistry;
use weir::formats::registry::{RegistryClient, SchemaType, value_subject};
use weir::formats::writers::WriterSchemas;
use weir::formats::{DataFormat, Decoder, Format, Key, Part};
use weir::plugin::{Runtime, RuntimeConfig};
use weir::publisher::source::{KafkaConnection, SchemaRegistry};
use weir::stream::buffer::MemoryBudget;
use weir::stream::worker;
use weir::stream::{Node, PublishStage, WorkerEvent, WorkerOptions};

use super::common;
use super::common::stream::{self, CLICKS_SCHEMA};
use super::dataset::CLICKS_AVRO;

const CLICKS_PROTO: &str = include_str!("../../../guest-examples/data/clicks.proto");
use super::dataset::{self, PARTITIONS};
use super::{BATCH, Broker, Cpu, Figures, Floor, Latency, Memory, Rate, SIZE_MB};

pub fn measure(broker: &Broker, n: usize, quick: bool) -> Figures {
    let bootstrap = broker.bootstrap();
    let settings = broker.client_settings();
    broker.create_topic("clicks", PARTITIONS);
    eprintln!("[{}] producing {n} messages ...", broker.name());
    let bytes = dataset::produce(&bootstrap, &settings, "clicks", n);
    // Watermarks may trail the acknowledgements for a moment.
    let waited = Instant::now();
    let mut held = dataset::held(&bootstrap, "clicks");
    while held < n && waited.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(500));
        held = dataset::held(&bootstrap, "clicks");
    }
    if held != n {
        // Tansu 0.x reports high watermarks short of the log end; reading the topic is the real check.
        eprintln!("[{}] watermarks say {held} of {n} messages; reading them is the check", broker.name());
    }
    let avg = bytes as f64 / n as f64;
    // Batches close at exactly BATCH messages: time up to the last full one, so no run waits for a clock.
    let timed = (n / BATCH).max(1) * BATCH;
    assert!(n >= BATCH, "the dataset must hold at least one {BATCH}-message batch");
    // The same events as Avro framed by a schema registry, on topic `Clicks`: its table is
    // `clicks` too (a table is named after its topic, lowercased), so the same plugin publishes it.
    let (registry, avro_id, avro_bytes) = produce_avro_copy(broker, n);
    let avro = Dataset::Avro { registry: registry.url() };

    eprintln!("[{}] the floor: decoding and writing the table, in memory ...", broker.name());
    let floor = floor(broker, &registry, avro_id);
    eprintln!("[{}] raw consume ...", broker.name());
    let raw = raw_consume(broker, n);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    eprintln!("[{}] weir end to end ...", broker.name());
    let (weir, stages, commits) =
        rt.block_on(weir_run(broker, &Dataset::Json, timed, PublishStage::Plugin, "weir-e2e"));
    eprintln!("[{}] weir end to end, Avro framed by a schema registry ...", broker.name());
    let (weir_avro, ..) = rt.block_on(weir_run(broker, &avro, timed, PublishStage::Plugin, "weir-avro"));
    eprintln!("[{}] weir, native identity ...", broker.name());
    let (native, ..) =
        rt.block_on(weir_run(broker, &Dataset::Json, timed, PublishStage::NativeIdentity, "weir-native"));
    eprintln!("[{}] the Python path ...", broker.name());
    let python = python_path(&bootstrap, &settings, timed);
    let peers = super::peers::run_all(&bootstrap, &settings, timed, avg, broker.name());
    let sizes: &[u64] = if quick { &[16, 64] } else { &[16, 64, 256] };
    let memory = sizes
        .iter()
        .map(|size| {
            eprintln!("[{}] peak RSS at {size} MB ...", broker.name());
            peak_rss(broker, n, *size)
        })
        .collect();
    // Last: its messages go after the dataset, on the same topic.
    eprintln!("[{}] latency ...", broker.name());
    let latency = rt.block_on(latency(broker, if quick { 5 } else { 15 }));

    Figures {
        broker: broker.name().into(),
        messages: n,
        avg_message_bytes: avg,
        partitions: PARTITIONS,
        raw_consume: Rate::new(n, raw.0, avg, raw.1),
        weir: Rate::new(timed, weir.0, avg, weir.1),
        avro_message_bytes: avro_bytes as f64 / n as f64,
        weir_avro: Rate::new(timed, weir_avro.0, avro_bytes as f64 / n as f64, weir_avro.1),
        weir_native_identity: Rate::new(timed, native.0, avg, native.1),
        python: Rate::new(timed, python.0, avg, python.1),
        peers,
        wasm_share: (stages.publish - stages.write) / 1e3 / weir.0,
        wasm_cpu_share: stages.plugin_cpu / 1e3 / weir.1.own,
        weir_stage_ms: stages,
        weir_commits: commits,
        delta: {
            eprintln!("[{}] the Delta log alone ...", broker.name());
            crate::delta_log::measure(if quick { 200 } else { 1000 })
        },
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()) as f64,
        floor,
        latency,
        memory,
    }
}

/// weir end to end on the dataset as registry-framed Avro alone: for working
/// on the Avro path's speed.
pub fn measure_weir_avro(broker: &Broker, n: usize) {
    let (registry, _, bytes) = produce_avro_copy(broker, n);
    let timed = (n / BATCH).max(1) * BATCH;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let avro = Dataset::Avro { registry: registry.url() };
    eprintln!("weir run from {:.6}", monotonic());
    let (run, t, commits) = rt.block_on(weir_run(broker, &avro, timed, PublishStage::Plugin, "weir-avro"));
    eprintln!("weir run until {:.6}", monotonic());
    let run = Rate::new(timed, run.0, bytes as f64 / n as f64, run.1);
    println!(
        "weir, Avro   {:>10.0} msg/s {:>7.2} CPU µs/msg {:>5.2} cores (broker {:.2}); stages over {commits} batches (ms): decode {:.0}, publish {:.0} (writing the table {:.0}), commit {:.0}",
        run.messages_per_s,
        run.cpu_us_per_message(),
        run.cpu_seconds / run.seconds,
        run.broker_cores(),
        t.decode,
        t.publish,
        t.write,
        t.commit
    );
}

/// The dataset as registry-framed Avro on topic `Clicks`, its schema in a
/// registry of its own: the registry, the schema's id and the bytes produced.
fn produce_avro_copy(broker: &Broker, n: usize) -> (EmbeddedRegistry, u32, u64) {
    let registry = EmbeddedRegistry::start().unwrap();
    let id = registry.register(&value_subject(AVRO_TOPIC), SchemaType::Avro, CLICKS_AVRO, vec![]).unwrap();
    broker.create_topic(AVRO_TOPIC, PARTITIONS);
    eprintln!("[{}] producing the {n} messages as registry-framed Avro ...", broker.name());
    let bytes = dataset::produce_avro(&broker.bootstrap(), &broker.client_settings(), AVRO_TOPIC, n, id);
    (registry, id, bytes)
}

/// Raw consume and weir end to end on the JSON dataset alone, printed as they
/// finish: for working on weir's speed without the whole comparison.
pub fn measure_weir(broker: &Broker, n: usize) {
    let settings = broker.client_settings();
    broker.create_topic("clicks", PARTITIONS);
    eprintln!("[{}] producing {n} messages ...", broker.name());
    let bytes = dataset::produce(&broker.bootstrap(), &settings, "clicks", n);
    let avg = bytes as f64 / n as f64;
    let timed = (n / BATCH).max(1) * BATCH;
    let raw = raw_consume(broker, n);
    let raw = Rate::new(n, raw.0, avg, raw.1);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    // The window on CLOCK_MONOTONIC, for `perf record -k CLOCK_MONOTONIC` and `perf report --time`.
    eprintln!("weir run from {:.6}", monotonic());
    let (weir, t, commits) = rt.block_on(weir_run(broker, &Dataset::Json, timed, PublishStage::Plugin, "weir-e2e"));
    eprintln!("weir run until {:.6}", monotonic());
    let weir = Rate::new(timed, weir.0, avg, weir.1);
    for (label, r) in [("raw consume", &raw), ("weir", &weir)] {
        println!(
            "{label:<12} {:>10.0} msg/s {:>7.2} CPU µs/msg {:>5.2} cores (broker {:.2})",
            r.messages_per_s,
            r.cpu_us_per_message(),
            r.cpu_seconds / r.seconds,
            r.broker_cores()
        );
    }
    println!(
        "weir/raw = {:.2}; stages over {commits} batches (ms): decode {:.0}, stage {:.0}, publish {:.0} (writing the table {:.0}), plugin CPU {:.0}, commit {:.0}, log {:.0}",
        weir.messages_per_s / raw.messages_per_s,
        t.decode,
        t.stage,
        t.publish,
        t.write,
        t.plugin_cpu,
        t.commit,
        t.log
    );
    // What speed may cost in memory: the peak RSS of a `weir stream` process at the 64 MB rollover.
    let memory = peak_rss(broker, n, SIZE_MB);
    println!(
        "peak RSS at {} MB: {:.0} MB (target {:.0}; largest batch {} messages)",
        memory.size_rollover_mb, memory.peak_rss_mb, memory.target_mb, memory.largest_batch
    );
    let latency = rt.block_on(latency(broker, 5));
    println!(
        "latency at {} msg/s with a 1 s time rollover ({} messages): p50 {:.0} ms, p99 {:.0} ms",
        latency.produce_rate, latency.messages, latency.p50_ms, latency.p99_ms
    );
}

fn monotonic() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

fn consumer_config(bootstrap: &str, settings: &[(&str, &str)], group: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    // The same consumer settings as weir's.
    for (k, v) in weir::sources::kafka::CONSUMER_DEFAULTS.iter().chain(settings) {
        config.set(*k, *v);
    }
    config
}

/// The topic of the Avro dataset.
const AVRO_TOPIC: &str = "Clicks";

/// Which copy of the dataset a run reads.
enum Dataset {
    /// JSON values on `clicks`.
    Json,
    /// Avro on `Clicks`, framed by the schema registry at this URL.
    Avro { registry: String },
}

/// Values of the dataset as the worker's decode runs (the size it hands off), keyed as produced.
fn runs_of(values: Vec<Vec<u8>>) -> Vec<Vec<weir::formats::RawMessage>> {
    let messages: Vec<weir::formats::RawMessage> = values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let (key, _) = dataset::message(i);
            let partition = (i % PARTITIONS as usize) as i32;
            weir::formats::RawMessage::new(partition, i as i64, Some(0), Some(key.as_bytes()), Some(value), vec![])
        })
        .collect();
    let per_run = weir::stream::buffer::DECODE_RUN_BYTES as usize / messages[0].size();
    messages.chunks(per_run).map(<[_]>::to_vec).collect()
}

/// Decodes `runs` with `decoder`, timed alone; the rows and the CPU it took.
fn decode_alone(
    broker: &Broker,
    decoder: &Decoder,
    runs: Vec<Vec<weir::formats::RawMessage>>,
) -> (Vec<RecordBatch>, Cpu) {
    let clocks = Clocks::start(broker);
    let decoded: Vec<RecordBatch> = runs
        .into_iter()
        .map(|run| {
            let decoded = decoder.decode(run);
            assert!(
                decoded.dead.is_empty(),
                "the dataset decodes cleanly: {:?}",
                decoded.dead.first().map(|d| &d.error)
            );
            decoded.batch
        })
        .collect();
    (decoded, clocks.stop(broker).1)
}

/// The CPU two steps no implementation skips cost per message here, done
/// alone in memory on four batches of the dataset: weir's JSON decoder
/// (simd-json's tape into Arrow columns), in runs of the size the worker decodes, and the table's
/// parquet file (dictionary, zstd, one column per core). Run 1 measures the
/// third, reading the messages. Decoding the Avro copy (arrow-avro, resolved
/// against the declared schema) is measured the same way.
fn floor(broker: &Broker, registry: &EmbeddedRegistry, avro_id: u32) -> Floor {
    const MESSAGES: usize = 4 * BATCH;
    let json = Decoder::plain(Format::parse(DataFormat::Json, CLICKS_SCHEMA, None).unwrap());
    let values: Vec<String> = (0..MESSAGES).map(|i| dataset::message(i).1).collect();
    let avro_values = weir::formats::encode_json_values(&dataset::avro_format(), &values, Some(avro_id)).unwrap();
    let json_runs = runs_of(values.iter().map(|v| v.clone().into_bytes()).collect());
    let client = RegistryClient::new(&SchemaRegistry { url: registry.url(), ..SchemaRegistry::default() }).unwrap();
    let writers = WriterSchemas::new(client, dataset::avro_format(), value_subject(AVRO_TOPIC), None);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(writers.prepare([weir::formats::registry::SchemaId::Confluent(avro_id)].into_iter()));
    let avro = Decoder::new(Part::new(dataset::avro_format(), Some(writers)), Key::Bytes, true);
    let (_, avro_decode) = decode_alone(broker, &avro, runs_of(avro_values));
    let proto = Format::parse(DataFormat::Protobuf, CLICKS_PROTO, Some("weir.examples.Click")).unwrap();
    let proto_values = weir::formats::encode_json_values(&proto, &values, None).unwrap();
    let (_, proto_decode) = decode_alone(broker, &Decoder::plain(proto), runs_of(proto_values));
    let (decoded, decode) = decode_alone(broker, &json, json_runs);
    let per_run = decoded[0].num_rows();
    let schema = decoded[0].schema();
    let rows: Vec<RecordBatch> = decoded
        .chunks(BATCH / per_run + 1)
        .map(|runs| arrow::compute::concat_batches(&schema, runs).unwrap())
        .collect();
    assert_eq!(rows.iter().map(RecordBatch::num_rows).sum::<usize>(), MESSAGES, "every message decodes");
    let dir = tempfile::tempdir().unwrap();
    let clocks = Clocks::start(broker);
    for (i, batch) in rows.iter().enumerate() {
        let path = dir.path().join(format!("{i}.parquet"));
        weir::tables::file::write_parquet(&path, &schema, std::slice::from_ref(batch), weir::tables::file::Kind::Table)
            .unwrap();
    }
    let (_, write) = clocks.stop(broker);
    let per_message = |cpu: Cpu| cpu.own * 1e6 / MESSAGES as f64;
    Floor {
        decode_us_per_message: per_message(decode),
        avro_decode_us_per_message: per_message(avro_decode),
        protobuf_decode_us_per_message: per_message(proto_decode),
        table_write_us_per_message: per_message(write),
    }
}

/// The wall and CPU clocks, read together at the start of a timed window.
struct Clocks {
    wall: Instant,
    cpu: Duration,
    broker: Option<Duration>,
}

impl Clocks {
    fn start(broker: &Broker) -> Self {
        Self { wall: Instant::now(), cpu: cpu_time::process(), broker: broker.cpu() }
    }

    /// Seconds since the start, and the CPU used meanwhile.
    fn stop(&self, broker: &Broker) -> (f64, Cpu) {
        let seconds = self.wall.elapsed().as_secs_f64();
        let own = cpu_time::process().saturating_sub(self.cpu).as_secs_f64();
        let used = broker.cpu().zip(self.broker).map(|(now, then)| now.saturating_sub(then).as_secs_f64());
        (seconds, Cpu { own, broker: used })
    }
}

/// librdkafka's own consume rate, the ceiling of anything built on it: every
/// partition assigned from its start (no group to join), read 256 messages a
/// call with the batch call weir's worker uses, nothing copied or kept; timed
/// from the first message.
fn raw_consume(broker: &Broker, n: usize) -> (f64, Cpu) {
    let consumer: BaseConsumer =
        consumer_config(&broker.bootstrap(), &broker.client_settings(), "raw-consume").create().unwrap();
    let mut assignment = TopicPartitionList::new();
    for partition in 0..PARTITIONS as i32 {
        assignment.add_partition_offset("clicks", partition, Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    // SAFETY: the consumer outlives the queue reference, destroyed below; each message
    // librdkafka hands out is destroyed once looked at.
    let queue = unsafe { rdsys::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
    let mut messages = [std::ptr::null_mut::<rdsys::rd_kafka_message_t>(); 256];
    let (mut seen, mut started, mut last) = (0, None, Instant::now());
    while seen < n {
        let got = unsafe { rdsys::rd_kafka_consume_batch_queue(queue, 100, messages.as_mut_ptr(), messages.len()) };
        for &message in &messages[..got.max(0) as usize] {
            unsafe {
                assert_eq!((*message).err, rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
                rdsys::rd_kafka_message_destroy(message);
            }
        }
        if got > 0 {
            started.get_or_insert_with(|| Clocks::start(broker));
            seen += got as usize;
            last = Instant::now();
        }
        assert!(last.elapsed() < Duration::from_secs(60), "the broker gave {seen} of the {n} messages produced");
    }
    let measured = started.unwrap().stop(broker);
    unsafe { rdsys::rd_kafka_queue_destroy(queue) };
    measured
}

fn connection(broker: &Broker, group: &str) -> KafkaConnection {
    KafkaConnection {
        bootstrap_servers: broker.bootstrap(),
        group_id: Some(group.into()),
        client_settings: broker.client_settings().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..KafkaConnection::default()
    }
}

struct Running {
    events: mpsc::UnboundedReceiver<WorkerEvent>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<weir::stream::WorkerExit>>,
    catalog: Arc<Catalog>,
    dir: tempfile::TempDir,
}

/// The table weir's runs write (`--table-format`, `--partition-by`): by default Delta, unpartitioned.
pub static TABLE: std::sync::OnceLock<(weir::tables::TableFormat, Vec<String>)> = std::sync::OnceLock::new();

fn start(broker: &Broker, dataset: &Dataset, group: &str, src_cfg: serde_json::Value, stage: PublishStage) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(Catalog::open(dir.path()).unwrap());
    let runtime = Arc::new(common::runtime());
    let mut publisher = match dataset {
        Dataset::Json => stream::publisher(connection(broker, group), &runtime, "read-clicks", "clicks", src_cfg, None),
        Dataset::Avro { registry } => {
            let connection = KafkaConnection {
                schema_registry: Some(SchemaRegistry { url: registry.clone(), ..SchemaRegistry::default() }),
                ..connection(broker, group)
            };
            let format = dataset::avro_format();
            stream::publisher_with(connection, &runtime, "read-clicks", AVRO_TOPIC, format, src_cfg, None)
        }
    };
    if let Some((format, partition_by)) = TABLE.get() {
        publisher.table_format = *format;
        publisher.partitioning.spec = weir::tables::partition::PartitionSpec::parse(partition_by).unwrap();
    }
    let node = Node {
        catalog: catalog.clone(),
        runtime,
        budget: Arc::new(MemoryBudget::new(4 << 30)),
        sources: Default::default(),
    };
    let (events_tx, events) = mpsc::unbounded_channel();
    let (stop, shutdown) = watch::channel(false);
    let options = WorkerOptions { publish: stage, ..WorkerOptions::default() };
    let task = tokio::spawn(worker::run(publisher, node, options, Some(events_tx), shutdown));
    Running { events, stop, task, catalog, dir }
}

impl Running {
    async fn assigned(&mut self) {
        while let Some(event) = self.events.recv().await {
            if matches!(event, WorkerEvent::Assigned(_)) {
                return;
            }
        }
        panic!("the worker stopped before it was assigned partitions: {:?}", (&mut self.task).await);
    }

    /// Waits until no batch has committed for `quiet`: the worker has read all there was.
    async fn idle(&mut self, quiet: Duration) {
        loop {
            match tokio::time::timeout(quiet, self.events.recv()).await {
                Err(_) => return,
                Ok(Some(WorkerEvent::AttemptFailed { error, .. })) => panic!("a batch failed: {error}"),
                Ok(Some(_)) => {}
                Ok(None) => panic!("the worker stopped: {:?}", (&mut self.task).await),
            }
        }
    }

    /// Waits until `messages` offsets are committed.
    async fn committed(&mut self, messages: usize) {
        let mut done = 0;
        while done < messages {
            match self.events.recv().await {
                Some(WorkerEvent::Committed(e)) => {
                    done += e.offsets.iter().map(|r| (r.last - r.first + 1) as usize).sum::<usize>()
                }
                Some(WorkerEvent::AttemptFailed { error, .. }) => panic!("a batch failed: {error}"),
                Some(_) => {}
                None => panic!("the worker stopped: {:?}", (&mut self.task).await),
            }
        }
    }

    /// Stops the worker; the catalog and its data directory stay until dropped.
    async fn stop(self) -> (Arc<Catalog>, tempfile::TempDir) {
        let _ = self.stop.send(true);
        self.task.await.unwrap().unwrap();
        (self.catalog, self.dir)
    }
}

/// weir end to end on the dataset, from the partitions' assignment to the
/// commit of `timed` messages: its wall time, the CPU time this process used
/// meanwhile, and the summed stage timings.
async fn weir_run(
    broker: &Broker,
    dataset: &Dataset,
    timed: usize,
    stage: PublishStage,
    group: &str,
) -> ((f64, Cpu), Timings, usize) {
    let src_cfg = serde_json::json!({
        "kafka.messages_rollover": BATCH, "kafka.size_rollover_mb": SIZE_MB, "kafka.time_rollover_seconds": 60,
    });
    let mut run = start(broker, dataset, group, src_cfg, stage);
    run.assigned().await;
    let clocks = Clocks::start(broker);
    run.committed(timed).await;
    let measured = clocks.stop(broker);
    let (catalog, _dir) = run.stop().await;
    let mut total = Timings::default();
    let committed: Vec<_> =
        catalog.executions("events/read_clicks").unwrap().into_iter().filter(|e| e.status == "committed").collect();
    for e in &committed {
        total.decode += e.timings_ms.decode;
        total.stage += e.timings_ms.stage;
        total.publish += e.timings_ms.publish;
        total.write += e.timings_ms.write;
        total.plugin_cpu += e.timings_ms.plugin_cpu;
        total.commit += e.timings_ms.commit;
        total.log += e.timings_ms.log;
    }
    (measured, total, committed.len())
}

fn python_path(bootstrap: &str, settings: &[(&str, &str)], timed: usize) -> (f64, Cpu) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/stream/python_path.py");
    let answer = super::peers::run_script(Path::new("python3"), &script, bootstrap, settings, "python-path", timed);
    (answer.seconds, answer.cpu)
}

/// Produce → committed and visible, at a steady rate, with a 1 s time rollover.
async fn latency(broker: &Broker, seconds: u64) -> Latency {
    const RATE: u64 = 2000;
    // The same topic (the plugin writes table `clicks`), read from its end on.
    let src_cfg = serde_json::json!({ "kafka.time_rollover_seconds": 1, "kafka.auto_offset_reset": "latest" });
    let mut run = start(broker, &Dataset::Json, "weir-latency", src_cfg, PublishStage::Plugin);
    run.assigned().await;
    // Let the consumer settle on the end of each partition before the first message. Tansu
    // puts `latest` behind the log's end, so the worker may first read older messages:
    // wait until it has committed them, or they would delay this run's and end its count early.
    tokio::time::sleep(Duration::from_secs(2)).await;
    run.idle(Duration::from_millis(2500)).await;
    let total = (RATE * seconds) as usize;
    let bootstrap = broker.bootstrap();
    let settings: Vec<(String, String)> =
        broker.client_settings().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let since = weir::catalog::now_ms();
    let producing = tokio::task::spawn_blocking(move || {
        let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let producer = dataset::producer(&bootstrap, &settings, "0");
        let started = Instant::now();
        for i in 0..total {
            // Steady: message i leaves at i / RATE seconds (CreateTime is taken here).
            let due = started + Duration::from_micros(i as u64 * 1_000_000 / RATE);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let (key, value) = dataset::message(i);
            producer.send(BaseRecord::to("clicks").key(&key).payload(&value)).map_err(|(e, _)| e).unwrap();
        }
        producer.flush(Duration::from_secs(30)).unwrap();
    });
    run.committed(total).await;
    producing.await.unwrap();
    let (catalog, _dir) = run.stop().await;
    let mut latencies = Vec::with_capacity(total);
    for version in catalog.versions("events", "clicks").unwrap() {
        for file in &version.files {
            let frame = weir::input::read(&catalog.data_dir().join(&file.path), None).unwrap();
            for batch in frame.batches {
                let ts = batch.column_by_name("_timestamp").unwrap();
                let ts = ts.as_any().downcast_ref::<TimestampMicrosecondArray>().unwrap();
                let ms = |i: usize| ts.value(i) / 1000;
                // Only this run's messages (a broker whose `latest` trails the log end hands out older ones too).
                let ours = (0..ts.len()).filter(|i| ms(*i) >= since);
                latencies.extend(ours.map(|i| (version.created_at_ms - ms(i)) as f64));
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Latency { produce_rate: RATE, messages: latencies.len(), p50_ms: at(0.5), p99_ms: at(0.99), max_ms: at(1.0) }
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Peak RSS of a `weir stream` process reading the whole dataset.
fn peak_rss(broker: &Broker, n: usize, size_mb: u64) -> Memory {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("clicks.json"), CLICKS_SCHEMA).unwrap();
    std::fs::write(
        dir.path().join("p.toml"),
        format!("name = \"read_clicks\"\nflush_interval_mins = 1\noutput_tables = [\"clicks\"]\n[source.kafka]\ntopic = \"clicks\"\ndata_format = \"json\"\nschema = \"clicks.json\"\n[source.kafka.src_cfg]\n\"kafka.size_rollover_mb\" = {size_mb}\n\"kafka.time_rollover_seconds\" = 2\n"),
    )
    .unwrap();
    // A restarted process, not a first start: the plugin is already compiled in the data
    // directory's artifact cache (a cold compile adds about 60 MB for a moment).
    let runtime =
        Runtime::new(RuntimeConfig { cache_dir: Some(dir.path().join("artifacts")), ..RuntimeConfig::default() });
    runtime.unwrap().load(&common::guest("read-clicks")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
    command
        .arg("stream")
        .arg(dir.path().join("p.toml"))
        .arg("--plugin")
        .arg(common::guest_path("read-clicks"))
        // Room for a partition's input and its output in guest memory (a passthrough
        // writes a frame of up to 65,536 rows back as it came, without a copy).
        .args(["--memory-limit", &format!("{}MiB", (4 * size_mb).max(256))])
        .args(["--bootstrap-servers", &broker.bootstrap(), "--group-id", &format!("rss-{size_mb}"), "--data-dir"])
        .arg(dir.path());
    for (k, v) in broker.client_settings() {
        command.args(["--client-setting", &format!("{k}={v}")]);
    }
    let log = std::fs::File::create(dir.path().join("weir.log")).unwrap();
    let mut child = command.stdout(Stdio::null()).stderr(log).spawn().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    let (mut peak, started) = (0, Instant::now());
    let largest_batch;
    loop {
        peak = peak.max(peak_rss_kib(child.id()));
        if let Some(status) = child.try_wait().unwrap() {
            let log = std::fs::read_to_string(dir.path().join("weir.log")).unwrap_or_default();
            panic!("weir stream exited early ({status}):\n{log}");
        }
        assert!(started.elapsed() < Duration::from_secs(600), "weir stream did not commit {n} rows within 600 s");
        let versions = catalog.versions("events", "clicks").unwrap();
        if versions.iter().map(|v| v.rows).sum::<u64>() >= n as u64 {
            largest_batch = versions.iter().map(|v| v.rows).max().unwrap_or(0);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    peak = peak.max(peak_rss_kib(child.id()));
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    Memory {
        size_rollover_mb: size_mb,
        peak_rss_mb: peak as f64 / 1024.0,
        target_mb: 1.5 * size_mb as f64 + 100.0,
        largest_batch,
    }
}
