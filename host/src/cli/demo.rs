//! `weir demo`: the whole pipeline on an embedded broker, in under a minute.
//! A `clicks` topic, sample click events with a few malformed ones, the
//! `read-clicks` publisher with a short rollover, and what got committed.
//! `--format avro|protobuf` produces the events registry-framed, through an
//! embedded schema registry.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use weir::catalog::Catalog;
use weir::embedded::broker::EmbeddedBroker;
use weir::embedded::registry::EmbeddedRegistry;
use weir::formats::confluent;
use weir::formats::registry::value_subject;
use weir::formats::writers::RegistryEvent;
use weir::formats::{DataFormat, Format};
use weir::plugin::{Limits, Runtime, RuntimeConfig, human_bytes};
use weir::publisher::StreamPublisher;
use weir::publisher::source::{KafkaConnection, KafkaSource, SchemaRegistry, SourceConfig};
use weir::stream::buffer::MemoryBudget;
use weir::stream::worker;
use weir::stream::{Node, WorkerEvent, WorkerExit, WorkerOptions};

/// The example publisher, built from guest-examples/read-clicks by build.rs.
const READ_CLICKS: &[u8] = include_bytes!(concat!(env!("WEIR_GUESTS_DIR"), "/read_clicks.wasm"));
const CLICKS_SCHEMA: &str = include_str!("../../../guest-examples/data/clicks.json");
const CLICKS_AVRO: &str = include_str!("../../../guest-examples/data/clicks.avsc");
const CLICKS_PROTO: &str = include_str!("../../../guest-examples/data/clicks.proto");

/// How the demo's events are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DemoFormat {
    /// Plain JSON values.
    Json,
    /// Avro, framed by the embedded schema registry.
    Avro,
    /// Protobuf, framed by the embedded schema registry.
    Protobuf,
}

impl DemoFormat {
    fn format(self) -> anyhow::Result<Format> {
        let parsed = match self {
            Self::Json => Format::parse(DataFormat::Json, CLICKS_SCHEMA, None),
            Self::Avro => Format::parse(DataFormat::Avro, CLICKS_AVRO, None),
            Self::Protobuf => Format::parse(DataFormat::Protobuf, CLICKS_PROTO, Some("weir.examples.Click")),
        };
        parsed.map_err(|e| anyhow::anyhow!("the demo's schema {e}"))
    }

    fn schema(self) -> &'static str {
        match self {
            Self::Json => CLICKS_SCHEMA,
            Self::Avro => CLICKS_AVRO,
            Self::Protobuf => CLICKS_PROTO,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run against this broker instead of the embedded one (the topic must exist or be creatable).
    #[arg(long, env = "WEIR_BOOTSTRAP_SERVERS")]
    bootstrap_servers: Option<String>,
    /// The topic to produce to and publish from.
    #[arg(long, default_value = "clicks")]
    topic: String,
    /// Where the catalog and the parquet files go (emptied first) [default: a temporary directory].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Good click events to produce.
    #[arg(long, default_value_t = 900)]
    messages: usize,
    /// Malformed events to mix in.
    #[arg(long, default_value_t = 7)]
    malformed: usize,
    /// Close a batch after this many messages (`kafka.messages_rollover`).
    #[arg(long, default_value_t = 400)]
    messages_rollover: u64,
    /// How the events are encoded: avro and protobuf go through an embedded schema registry.
    #[arg(long, value_enum, default_value_t = DemoFormat::Json)]
    format: DemoFormat,
}

pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(demo(args))?;
    Ok(std::process::ExitCode::SUCCESS)
}

async fn demo(args: Args) -> anyhow::Result<()> {
    let data_dir = args.data_dir.clone().unwrap_or_else(|| std::env::temp_dir().join("weir-demo"));
    if data_dir.join("catalog.db").exists() {
        std::fs::remove_dir_all(&data_dir).with_context(|| format!("emptying {}", data_dir.display()))?;
    }
    let (_broker, bootstrap) = match &args.bootstrap_servers {
        Some(servers) => (None, servers.clone()),
        None => {
            let broker = EmbeddedBroker::start(1)?;
            broker.create_topic(&args.topic, 3)?;
            let servers = broker.bootstrap_servers().to_string();
            println!("embedded Kafka broker on {servers}, topic `{}` with 3 partitions", args.topic);
            (Some(broker), servers)
        }
    };
    let mut connection = KafkaConnection { bootstrap_servers: bootstrap.clone(), ..KafkaConnection::default() };
    let format = args.format.format()?;
    // Avro and Protobuf come framed by a schema registry, as most real topics do.
    let (_registry, schema_id) = match args.format {
        DemoFormat::Json => (None, None),
        registry_format => {
            let registry = EmbeddedRegistry::start()?;
            let subject = value_subject(&args.topic);
            let id = registry
                .register(&subject, format.data_format().schema_type(), registry_format.schema(), vec![])
                .map_err(anyhow::Error::msg)?;
            println!("embedded schema registry on {}, subject `{subject}`: schema id {id}", registry.url());
            connection.schema_registry = Some(SchemaRegistry { url: registry.url(), ..SchemaRegistry::default() });
            (Some(registry), Some(id))
        }
    };

    let produced = produce(&connection, &args, &format, schema_id).await?;
    println!("produced {} click events ({} malformed) to `{}`", produced.0 + produced.1, produced.1, args.topic);

    let runtime = Arc::new(Runtime::new(RuntimeConfig::default())?);
    let plugin = runtime.load(READ_CLICKS).context("loading the read-clicks example")?;
    let catalog = Arc::new(Catalog::open(&data_dir)?);
    let src_cfg = [
        ("kafka.time_rollover_seconds".to_string(), json!(2)),
        ("kafka.messages_rollover".to_string(), json!(args.messages_rollover)),
    ]
    .into();
    let publisher = StreamPublisher {
        collection: "events".into(),
        name: "read_clicks".into(),
        connection,
        source: KafkaSource::new(args.topic.clone(), format, SourceConfig::parse(&src_cfg)?),
        flush_interval_mins: 1,
        plugin,
        limits: Limits::default(),
        partitioning: Default::default(),
        table_format: Default::default(),
    };
    let rollover = publisher.rollover();
    println!(
        "publisher events/read_clicks ({}): batches close after {} messages or {} s\n",
        &publisher.plugin.digest()[..19],
        args.messages_rollover,
        rollover.time.as_secs()
    );

    let node = Node {
        catalog: catalog.clone(),
        runtime,
        budget: Arc::new(MemoryBudget::new(1 << 30)),
        sources: Default::default(),
    };
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (stop, shutdown) = watch::channel(false);
    let table = publisher.output_table();
    let worker = tokio::spawn(worker::run(publisher, node, WorkerOptions::default(), Some(events_tx), shutdown));

    let (mut rows, mut dead, mut batches) = (0u64, 0u64, 0u32);
    // A batch's line is printed when it commits: the next batch may close before
    // the one before it commits, and batches commit in the order they closed.
    let mut closed = std::collections::VecDeque::new();
    let want = (produced.0 + produced.1) as u64;
    let waited = tokio::time::timeout(Duration::from_secs(90), async {
        while let Some(event) = events.recv().await {
            match event {
                WorkerEvent::Assigned(p) => println!("  partitions {:?} assigned", p.keys().collect::<Vec<_>>()),
                WorkerEvent::Closed { reason, messages, bytes } => closed.push_back(format!(
                    "  batch closed by {:<8} {messages:>4} messages, {:>9} → ",
                    reason.as_str(),
                    human_bytes(bytes)
                )),
                WorkerEvent::Committed(e) => {
                    batches += 1;
                    rows += e.rows_out;
                    dead += e.dead_letters;
                    let offsets: Vec<String> =
                        e.offsets.iter().map(|r| format!("p{} {} to {}", r.partition, r.first, r.last)).collect();
                    let version = e.table_version.map_or("no new version".into(), |v| format!("{table} v{v}"));
                    println!(
                        "{}{version}: {} rows, {} dead letters  [{}]",
                        closed.pop_front().unwrap_or_default(),
                        e.rows_out,
                        e.dead_letters,
                        offsets.join(", ")
                    );
                    if rows + dead >= want && batches >= 2 {
                        return;
                    }
                }
                WorkerEvent::AttemptFailed { attempt, of, error, .. } => {
                    println!("attempt {attempt} of {of} failed: {error}")
                }
                WorkerEvent::Dropped { reason } => {
                    println!("{}dropped, to be re-read: {reason}", closed.pop_front().unwrap_or_default())
                }
                WorkerEvent::Registry(RegistryEvent::Schema { id, usable: true }) => {
                    println!("  writer {id} fetched from the registry")
                }
                WorkerEvent::Registry(RegistryEvent::Schema { id, usable: false }) => {
                    println!("  writer {id} is not usable: its messages become dead letters")
                }
                other => println!("  {other:?}"),
            }
        }
    })
    .await;
    let _ = stop.send(true);
    let exit = worker.await.context("the worker task")??;
    if waited.is_err() {
        bail!("timed out after 90 s with {rows} rows and {dead} dead letters of {want} messages committed");
    }
    if let WorkerExit::Failed(e) = exit {
        bail!("the publisher failed: {e}");
    }

    println!("\ncommitted versions of events/{table}:");
    println!("  {:<8} {:>6}  FILE", "VERSION", "ROWS");
    for v in catalog.versions("events", &table)? {
        println!("  {:<8} {:>6}  {}", v.version, v.rows, data_dir.join(&v.files[0].path).display());
    }
    let location = data_dir.join(weir::tables::delta::table_dir("events", &table));
    println!("\nevents/{table} is a Delta Lake table at {}: read any version with", location.display());
    println!("  duckdb   SELECT * FROM delta_scan('{}', version => 1)", location.display());
    println!("  polars   pl.scan_delta('{}', version=1)", location.display());
    println!("\ndead letters (kept in the catalog: the source has no dead-letter topic):");
    for d in catalog.dead_letters("events/read_clicks")? {
        let value =
            String::from_utf8_lossy(d.value.as_deref().unwrap_or_default()).chars().take(40).collect::<String>();
        println!("  p{} offset {:<5} {:<42} {}", d.partition, d.offset, format!("{value:?}"), d.error);
    }
    println!(
        "\n{rows} rows in {batches} versions, {dead} dead letters; catalog at {}",
        data_dir.join("catalog.db").display()
    );
    Ok(())
}

/// Produces the sample: click events keyed by user, and a few malformed messages.
async fn produce(
    connection: &KafkaConnection,
    args: &Args,
    format: &Format,
    schema_id: Option<u32>,
) -> anyhow::Result<(usize, usize)> {
    let mut config = ClientConfig::new();
    for (k, v) in connection.client_config() {
        config.set(k, v);
    }
    let producer: FutureProducer = config.create()?;
    let pages = ["/", "/pricing", "/docs", "/docs/quickstart", "/blog/weir-0-1", "/signup"];
    let malformed: Vec<Vec<u8>> = match schema_id {
        None => [
            r#"{"event_id": "evt-bad-1", "user_id": "not a number", "url": "/", "ts": "2026-11-29T10:00:00Z"}"#,
            r#"{"event_id": "evt-bad-2", "url": "/"}"#,
            r#"{"event_id": "evt-bad-3", "user_id": 3, "url": "/", "ts": "2026-11-29T10:00:00Z""#,
            "not json at all",
            r#"[{"event_id": "evt-bad-5"}]"#,
        ]
        .iter()
        .map(|m| m.as_bytes().to_vec())
        .collect(),
        // Registry-framed: unframed bytes, a cut header, an id the registry lacks, a body that is not the record.
        Some(id) => vec![
            b"not framed at all".to_vec(),
            vec![0, 0, 1],
            confluent::frame(9999, (format.data_format() == DataFormat::Protobuf).then_some(&[0][..]), b"\x02"),
            confluent::frame(
                id,
                (format.data_format() == DataFormat::Protobuf).then_some(&[0][..]),
                &[0x0a, 0xff, 0xff],
            ),
        ],
    };
    let mut deliveries = Vec::new();
    let every = (args.messages / args.malformed.max(1)).max(1);
    let mut bad = 0;
    let mut events = Vec::with_capacity(args.messages);
    for i in 0..args.messages {
        let user = (i * 7919) % 97;
        let (country, device) = (["DE", "FR", "US", "JP"][i % 4], ["desktop", "mobile"][i % 2]);
        let payload = json!({
            "event_id": format!("evt-{i:05}"),
            "user_id": user,
            "url": pages[i % pages.len()],
            "referrer": if i % 3 == 0 { serde_json::Value::Null } else { json!("search") },
            "ts": format!("2026-11-29T10:{:02}:{:02}Z", (i / 60) % 60, i % 60),
            "duration_ms": (i * 37) % 5000,
            "country": country,
            "device": device,
        })
        .to_string();
        events.push((user, payload));
    }
    let values: Vec<String> = events.iter().map(|(_, v)| v.clone()).collect();
    let encoded = weir::formats::encode_json_values(format, &values, schema_id).map_err(anyhow::Error::msg)?;
    for (i, ((user, _), payload)) in events.iter().zip(&encoded).enumerate() {
        deliveries.push(
            producer
                .send_result(FutureRecord::to(&args.topic).key(&user.to_string()).payload(payload))
                .map_err(|(e, _)| e)?,
        );
        if i % every == every - 1 && bad < args.malformed {
            let bytes = &malformed[bad % malformed.len()];
            deliveries.push(
                producer
                    .send_result(FutureRecord::to(&args.topic).key(&bad.to_string()).payload(bytes))
                    .map_err(|(e, _)| e)?,
            );
            bad += 1;
        }
    }
    for d in deliveries {
        d.await?.map_err(|(e, _)| e).context("producing the sample events")?;
    }
    producer.flush(Duration::from_secs(10))?;
    Ok((args.messages, bad))
}
