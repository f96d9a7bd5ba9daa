//! `weir stream`: run one stream publisher from its declaration, until SIGINT
//! or SIGTERM (which commit the open batch within a deadline, or drop it to be
//! re-read). No server needed: the catalog is the data directory's.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;

use weir::catalog::Catalog;
use weir::formats::registry::RegistryClient;
use weir::formats::writers::{self, CrossCheckError};
use weir::plugin::{Limits, Runtime, RuntimeConfig};
use weir::publisher::StreamPublisher;
use weir::publisher::change_log;
use weir::publisher::declaration::{Declaration, Resolution};
use weir::sources::postgres::publisher::ChangeLogPublisher;
use weir::stream::buffer::MemoryBudget;
use weir::stream::worker;
use weir::stream::{Node, WorkerExit, WorkerOptions};

use super::connection::ConnectionArgs;
use super::units::{parse_duration, parse_size};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The publisher declaration (TOML).
    declaration: PathBuf,
    /// The publisher's plugin: a WebAssembly component.
    #[arg(long)]
    plugin: PathBuf,
    /// The collection the publisher and its table belong to.
    #[arg(long, default_value = "events", env = "WEIR_COLLECTION")]
    collection: String,
    /// Where the catalog and the table files live.
    #[arg(long, default_value = "weir-data", env = "WEIR_DATA_DIR")]
    data_dir: PathBuf,
    #[command(flatten)]
    connection: ConnectionArgs,
    /// Linear memory the plugin may use per batch.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    memory_limit: u64,
    /// CPU time the plugin may use per batch.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    deadline: Duration,
    /// Raw message bytes the open batches of all workers may hold; past it, the
    /// largest batch closes early. Not the process's memory: a closed batch is
    /// also decoded, framed and copied into its plugin, so the peak is a few
    /// times the largest batch (README, "Benchmark").
    #[arg(long, default_value = "1GiB", value_parser = parse_size, env = "WEIR_MEMORY_BUDGET")]
    memory_budget: u64,
    /// How long a shutdown may spend committing the open batch.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shutdown_deadline: Duration,
}

/// Registry mode: the declared schema must read what the registry holds. A
/// registry that cannot be reached only warns: the worker waits for it.
fn cross_check(
    registry: &weir::publisher::source::SchemaRegistry,
    source: &weir::publisher::source::KafkaSource,
) -> anyhow::Result<()> {
    let client = RegistryClient::new(registry)?;
    match writers::cross_check_topic(&source.format, &source.key, source.subjects, &client, &source.topic) {
        Ok(checked) => {
            for v in checked {
                tracing::info!(subject = %v.subject, version = v.version, id = %v.id, "schema cross-checked against the registry");
            }
            Ok(())
        }
        Err(e @ CrossCheckError::Registry(_)) => {
            tracing::warn!(error = %e, "starting anyway: messages wait until the registry answers");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(stream(args))
}

async fn stream(args: Args) -> anyhow::Result<ExitCode> {
    // Heard from the start: a signal while the plugin compiles stops it cleanly too.
    let shutdown = stopping();
    let text = std::fs::read_to_string(&args.declaration)
        .with_context(|| format!("reading {}", args.declaration.display()))?;
    let base = args.declaration.parent().map(PathBuf::from).unwrap_or_default();
    let resolution = Declaration::parse(&text)
        .and_then(|d| d.resolve_any(Some(&base)))
        .with_context(|| format!("publisher declaration {}", args.declaration.display()))?;
    let resolved = match resolution {
        Resolution::Stream(resolved) => resolved,
        Resolution::ChangeLog(resolved) => return change_log(args, resolved, shutdown).await,
    };

    let connection = args.connection.required()?;
    if let Some(registry) = &connection.schema_registry {
        cross_check(registry, &resolved.source)?;
    }

    let (node, plugin) = node(&args)?;
    let publisher = StreamPublisher {
        collection: args.collection,
        name: resolved.name,
        connection,
        source: resolved.source,
        flush_interval_mins: resolved.flush_interval_mins,
        plugin,
        limits: Limits { memory_bytes: args.memory_limit, deadline: args.deadline, ..Limits::default() },
        partitioning: resolved.partitioning,
        table_format: resolved.table_format.unwrap_or_default(),
    };
    let options = WorkerOptions { shutdown_deadline: args.shutdown_deadline, ..WorkerOptions::default() };
    exit(worker::run(publisher, node, options, None, shutdown).await?)
}

/// A publisher of a database's change log.
async fn change_log(
    args: Args,
    resolved: change_log::Resolved,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<ExitCode> {
    let connection = args.connection.postgres()?;
    let (node, plugin) = node(&args)?;
    let publisher = ChangeLogPublisher {
        collection: args.collection.clone(),
        name: resolved.name,
        connection,
        source: resolved.source,
        output_tables: resolved.output_tables,
        flush_interval_mins: resolved.flush_interval_mins,
        plugin,
        limits: Limits { memory_bytes: args.memory_limit, deadline: args.deadline, ..Limits::default() },
    };
    let options = WorkerOptions { shutdown_deadline: args.shutdown_deadline, ..WorkerOptions::default() };
    exit(weir::sources::postgres::publisher::run(publisher, node, options, None, shutdown).await?)
}

/// The node one publisher runs on, and its plugin loaded.
fn node(args: &Args) -> anyhow::Result<(Node, weir::plugin::Plugin)> {
    let runtime = Arc::new(Runtime::new(RuntimeConfig {
        cache_dir: Some(args.data_dir.join("artifacts")),
        ..RuntimeConfig::default()
    })?);
    let bytes = std::fs::read(&args.plugin).with_context(|| format!("reading plugin {}", args.plugin.display()))?;
    let plugin = runtime.load(&bytes).with_context(|| format!("loading plugin {}", args.plugin.display()))?;
    let catalog = Arc::new(Catalog::open(&args.data_dir)?);
    let budget = Arc::new(MemoryBudget::new(args.memory_budget));
    Ok((Node { catalog, runtime, budget, sources: Default::default() }, plugin))
}

/// Turns true at SIGINT or SIGTERM: the open batch is committed, then the publisher stops.
fn stopping() -> watch::Receiver<bool> {
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down: committing the open batch");
        let _ = stop.send(true);
    });
    shutdown
}

fn exit(exit: WorkerExit) -> anyhow::Result<ExitCode> {
    match exit {
        WorkerExit::Shutdown => Ok(ExitCode::SUCCESS),
        WorkerExit::Failed(error) => {
            eprintln!("error: the publisher failed: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}
