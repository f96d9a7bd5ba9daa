//! `weir demo`: the whole pipeline on an embedded broker, in under a minute.
//! A `clicks` topic, sample click events with a few malformed ones, the
//! `read-clicks` publisher with a short rollover, and what got committed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use weir::buffer::MemoryBudget;
use weir::catalog::Catalog;
use weir::embedded_broker::EmbeddedBroker;
use weir::plugin::{Limits, Runtime, RuntimeConfig, human_bytes};
use weir::source::{DataFormat, KafkaConnection, KafkaSource, SourceConfig, load_schema};
use weir::worker::{self, Node, StreamPublisher, WorkerEvent, WorkerExit, WorkerOptions};

/// The example publisher, built from guest-examples/read-clicks by build.rs.
const READ_CLICKS: &[u8] = include_bytes!(concat!(env!("WEIR_GUESTS_DIR"), "/read_clicks.wasm"));
const CLICKS_SCHEMA: &str = include_str!("../../../guest-examples/data/clicks.json");

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
    let connection = KafkaConnection { bootstrap_servers: bootstrap.clone(), ..KafkaConnection::default() };

    let produced = produce(&connection, &args).await?;
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
        source: KafkaSource {
            topic: args.topic.clone(),
            data_format: DataFormat::Json,
            schema: load_schema(CLICKS_SCHEMA, None)?,
            config: SourceConfig::parse(&src_cfg)?,
            dead_letter_topic: None,
        },
        flush_interval_mins: 1,
        plugin,
        limits: Limits::default(),
    };
    let rollover = publisher.rollover();
    println!(
        "publisher events/read_clicks ({}): batches close after {} messages or {} s\n",
        &publisher.plugin.digest()[..19],
        args.messages_rollover,
        rollover.time.as_secs()
    );

    let node = Node { catalog: catalog.clone(), runtime, budget: Arc::new(MemoryBudget::new(1 << 30)) };
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (stop, shutdown) = watch::channel(false);
    let table = publisher.output_table();
    let worker = tokio::spawn(worker::run(publisher, node, WorkerOptions::default(), Some(events_tx), shutdown));

    let (mut rows, mut dead, mut batches) = (0u64, 0u64, 0u32);
    let want = (produced.0 + produced.1) as u64;
    let waited = tokio::time::timeout(Duration::from_secs(90), async {
        while let Some(event) = events.recv().await {
            match event {
                WorkerEvent::Assigned(p) => println!("  partitions {:?} assigned", p.keys().collect::<Vec<_>>()),
                WorkerEvent::Closed { reason, messages, bytes } => {
                    print!(
                        "  batch closed by {:<8} {messages:>4} messages, {:>9} → ",
                        reason.as_str(),
                        human_bytes(bytes)
                    )
                }
                WorkerEvent::Committed(e) => {
                    batches += 1;
                    rows += e.rows_out;
                    dead += e.dead_letters;
                    let offsets: Vec<String> =
                        e.offsets.iter().map(|r| format!("p{} {}..{}", r.partition, r.first, r.last)).collect();
                    let version = e.table_version.map_or("no new version".into(), |v| format!("{table} v{v}"));
                    println!(
                        "{version}: {} rows, {} dead letters  [{}]",
                        e.rows_out,
                        e.dead_letters,
                        offsets.join(", ")
                    );
                    if rows + dead >= want && batches >= 2 {
                        return;
                    }
                }
                WorkerEvent::AttemptFailed { attempt, error } => println!("attempt {attempt} failed: {error}"),
                WorkerEvent::Dropped { reason } => println!("dropped, to be re-read: {reason}"),
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
        println!("  {:<8} {:>6}  {}", v.version, v.rows, data_dir.join(&v.files[0]).display());
    }
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
async fn produce(connection: &KafkaConnection, args: &Args) -> anyhow::Result<(usize, usize)> {
    let mut config = ClientConfig::new();
    for (k, v) in connection.client_config() {
        config.set(k, v);
    }
    let producer: FutureProducer = config.create()?;
    let pages = ["/", "/pricing", "/docs", "/docs/quickstart", "/blog/weir-0-1", "/signup"];
    let malformed = [
        r#"{"event_id": "evt-bad-1", "user_id": "not a number", "url": "/", "ts": "2026-11-29T10:00:00Z"}"#,
        r#"{"event_id": "evt-bad-2", "url": "/"}"#,
        r#"{"event_id": "evt-bad-3", "user_id": 3, "url": "/", "ts": "2026-11-29T10:00:00Z""#,
        "not json at all",
        r#"[{"event_id": "evt-bad-5"}]"#,
    ];
    let mut deliveries = Vec::new();
    let every = (args.messages / args.malformed.max(1)).max(1);
    let mut bad = 0;
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
        deliveries.push(
            producer
                .send_result(FutureRecord::to(&args.topic).key(&user.to_string()).payload(&payload))
                .map_err(|(e, _)| e)?,
        );
        if i % every == every - 1 && bad < args.malformed {
            let text = malformed[bad % malformed.len()];
            deliveries.push(
                producer
                    .send_result(FutureRecord::to(&args.topic).key(&bad.to_string()).payload(text))
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
