//! `weir serve`: the HTTP API and the stream workers of every registered publisher.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use weir::serve::{ServeConfig, TlsFiles, serve};
use weir::stream::WorkerOptions;

use super::units::{parse_duration, parse_size};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the catalog, the table files and the uploaded modules live.
    #[arg(long, default_value = "weir-data", env = "WEIR_DATA_DIR")]
    data_dir: PathBuf,
    /// The catalog several nodes share: a PostgreSQL URL
    /// (postgres://USER[:PASSWORD]@HOST[:PORT]/DB) [default: SQLite in the data directory].
    /// Every node then needs the same --secret-key-file.
    #[arg(long, env = "WEIR_CATALOG", hide_env_values = true)]
    catalog: Option<String>,
    /// Where tables (their files and Delta logs) and uploaded modules live, shared
    /// by the nodes of a cluster: s3://BUCKET[/PREFIX], with the usual AWS_*
    /// variables (AWS_ENDPOINT_URL for an S3-compatible store) [default: the data directory].
    #[arg(long, env = "WEIR_STORE")]
    store: Option<String>,
    /// The address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:7878", env = "WEIR_LISTEN")]
    listen: SocketAddr,
    /// The admin token [default: generated at first start and shown once].
    #[arg(long, env = "WEIR_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// The key connection secrets are sealed under (64 hex digits)
    /// [default: <data dir>/secret.key, generated at first start].
    #[arg(long, env = "WEIR_SECRET_KEY_FILE")]
    secret_key_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM, the server's own first);
    /// re-read with the key on SIGHUP.
    #[arg(long, env = "WEIR_SERVE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, env = "WEIR_SERVE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Raw message bytes the open batches of all workers may hold; past it, the
    /// largest batch closes early. Not the process's memory: a closed batch is
    /// also decoded, framed and copied into its plugin, so the peak is a few
    /// times the largest batch (README, "Benchmark").
    #[arg(long, default_value = "1GiB", value_parser = parse_size, env = "WEIR_MEMORY_BUDGET")]
    memory_budget: u64,
    /// The largest module anyone may upload.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    max_module_size: u64,
    /// How long a shutdown may spend committing each publisher's open batch.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shutdown_deadline: Duration,
    /// How often consumer lag is measured for /metrics.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    lag_interval: Duration,
    /// How often this node picks up publishers registered, changed, paused or
    /// deleted on other nodes of its catalog, and records its heartbeat.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    cluster_poll: Duration,
    /// How long a web console session (at the server's `/`) lasts without a request.
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    console_idle: Duration,
    /// Also run an in-process Kafka broker (the demo's: librdkafka's mock
    /// cluster, on a loopback port printed at start), for trying weir with
    /// nothing else installed. Its topics live in memory, for as long as the
    /// server runs. A real deployment gives each collection its brokers instead.
    #[arg(long)]
    embedded_broker: bool,
    /// A topic the embedded broker starts with, NAME or NAME:PARTITIONS (repeat for more).
    #[arg(
        long = "embedded-topic",
        value_name = "NAME[:PARTITIONS]",
        default_value = "clicks:3",
        requires = "embedded_broker"
    )]
    embedded_topics: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = ServeConfig {
        catalog: args.catalog,
        store: args.store,
        admin_token: args.admin_token,
        secret_key_file: args.secret_key_file,
        tls: args.tls_cert.zip(args.tls_key).map(|(cert, key)| TlsFiles { cert, key }),
        memory_budget: args.memory_budget,
        max_module_bytes: args.max_module_size,
        lag_interval: args.lag_interval,
        cluster_poll: args.cluster_poll,
        console_idle: args.console_idle,
        worker: WorkerOptions { shutdown_deadline: args.shutdown_deadline, ..WorkerOptions::default() },
        ..ServeConfig::new(args.data_dir, args.listen)
    };
    // Lives as long as the server does.
    let _broker = match args.embedded_broker {
        true => Some(embedded_broker(&args.embedded_topics)?),
        false => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(serve(config))?;
    Ok(ExitCode::SUCCESS)
}

/// The in-process broker with `topics` (`NAME[:PARTITIONS]`), its address said.
fn embedded_broker(topics: &[String]) -> anyhow::Result<weir::embedded::broker::EmbeddedBroker> {
    let broker = weir::embedded::broker::EmbeddedBroker::start(1)?;
    let mut made = Vec::new();
    for topic in topics {
        let (name, partitions) = match topic.split_once(':') {
            Some((name, n)) => (
                name,
                n.parse().map_err(|_| {
                    anyhow::anyhow!("--embedded-topic {topic}: the partitions after `:` must be a whole number")
                })?,
            ),
            None => (topic.as_str(), 1),
        };
        broker.create_topic(name, partitions)?;
        made.push(format!("`{name}` ({partitions} partitions)"));
    }
    let servers = broker.bootstrap_servers();
    println!("embedded Kafka broker on {servers}, in memory while this server runs; topics {}", made.join(", "));
    println!("  give collections its address: weir collection create events --bootstrap-servers {servers}");
    println!(
        "  produce to it with any Kafka client (kcat -P -b {servers} -t clicks), or sample clicks with `weir demo --bootstrap-servers {servers}` (which also runs its own pipeline on them)"
    );
    Ok(broker)
}
