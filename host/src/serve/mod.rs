//! `weir serve`: the HTTP API and the stream workers of every registered
//! publisher, on one data directory (SQLite catalog, parquet files, uploaded
//! modules). Workers start on boot and resume from the catalog's offsets.

mod admin;
mod api;
mod audit;
mod auth;
mod cluster;
mod collections;
mod console;
mod dead_letters;
mod error;
mod iceberg;
mod metrics;
mod partitioning;
mod plugins;
mod publishers;
mod reprocess;
mod request;
mod supervisor;
mod tables;
mod tenants;
mod tls;
mod workers;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::catalog::Catalog;
use crate::plugin::{Runtime, RuntimeConfig};
use crate::secrets::{Keyring, default_key_file};
use crate::stream::buffer::MemoryBudget;
use crate::stream::{Node, WorkerOptions};
pub use auth::{new_token, token_sha256};
use metrics::Metrics;
use supervisor::Supervisor;
pub use tls::TlsFiles;

/// How a server runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub data_dir: PathBuf,
    /// The catalog: a PostgreSQL URL several nodes share; when unset, SQLite
    /// in the data directory.
    pub catalog: Option<String>,
    /// Where tables (data files and Delta logs) and modules live: an object
    /// store URL (`s3://bucket/prefix`) several nodes share; when unset, the
    /// data directory.
    pub store: Option<String>,
    pub listen: SocketAddr,
    /// The admin token; when unset, one is generated at first start and shown once.
    pub admin_token: Option<String>,
    /// The key connection secrets are sealed under; when unset,
    /// `<data dir>/secret.key`, generated at first start.
    pub secret_key_file: Option<PathBuf>,
    /// HTTPS: the certificate and key files (re-read on SIGHUP); without, plain HTTP.
    pub tls: Option<TlsFiles>,
    /// Bytes all workers may buffer before the largest batch closes early.
    pub memory_budget: u64,
    /// The largest module any tenant may upload (a tenant's quota may be lower).
    pub max_module_bytes: u64,
    /// How long the connection check at registration waits for the brokers.
    pub check_timeout: Duration,
    /// How often consumer lag is measured for the metrics.
    pub lag_interval: Duration,
    /// How often this node brings its workers to the catalog's publishers
    /// (changes made on other nodes) and records its heartbeat.
    pub cluster_poll: Duration,
    /// How long a console session lasts without a request.
    pub console_idle: Duration,
    pub worker: WorkerOptions,
}

impl ServeConfig {
    pub fn new(data_dir: PathBuf, listen: SocketAddr) -> Self {
        Self {
            data_dir,
            catalog: None,
            store: None,
            listen,
            admin_token: None,
            secret_key_file: None,
            tls: None,
            memory_budget: 1 << 30,
            max_module_bytes: 64 << 20,
            check_timeout: Duration::from_secs(10),
            lag_interval: Duration::from_secs(15),
            cluster_poll: Duration::from_secs(2),
            console_idle: Duration::from_secs(30 * 60),
            worker: WorkerOptions::default(),
        }
    }
}

/// What every request handler shares.
pub struct App {
    pub catalog: Arc<Catalog>,
    pub runtime: Arc<Runtime>,
    pub supervisor: Supervisor,
    pub admin_token_sha256: String,
    pub config: ServeConfig,
    pub audit: audit::Audit,
    /// Held while the workers are brought to the catalog (`cluster::reconcile`).
    pub control: tokio::sync::Mutex<()>,
    /// The web console's signed-in browsers.
    pub sessions: console::sessions::Sessions,
}

const ADMIN_TOKEN_SETTING: &str = "admin_token_sha256";

/// Runs the server until SIGINT/SIGTERM; then every worker commits its open
/// batch (within the shutdown deadline) before the process exits.
pub async fn serve(config: ServeConfig) -> anyhow::Result<()> {
    let key_file = config.secret_key_file.clone().unwrap_or_else(|| default_key_file(&config.data_dir));
    if config.catalog.is_some() && !key_file.exists() {
        // A key generated here would seal what the other nodes cannot unseal.
        anyhow::bail!(
            "a shared catalog needs the same secret key on every node, and {} does not exist: make one \
             (`openssl rand -hex 32 > weir.key; chmod 600 weir.key`), copy it to every node and start each with \
             --secret-key-file weir.key",
            key_file.display()
        );
    }
    let (keyring, generated) = Keyring::open(&key_file, config.secret_key_file.is_none())?;
    if generated {
        println!(
            "generated the key connection secrets are sealed under: {} (mode 0600). Keep a copy apart from the \
             catalog's backups: without it, the stored credentials cannot be read",
            key_file.display()
        );
    }
    let store = crate::store::Store::open_at(config.store.as_deref(), &config.data_dir)?;
    let catalog = Arc::new(Catalog::open_at(config.catalog.as_deref(), &config.data_dir, keyring)?.with_store(store));
    let admin_token_sha256 = match &config.admin_token {
        Some(token) => token_sha256(token),
        None => match catalog.setting(ADMIN_TOKEN_SETTING)? {
            Some(sha) => sha,
            None => {
                let token = new_token();
                let sha = token_sha256(&token);
                // Nodes of a cluster starting together: the first one's token is the one.
                if catalog.add_setting(ADMIN_TOKEN_SETTING, &sha)? {
                    println!("admin token (shown once, keep it safe; it creates tenants): {token}");
                    sha
                } else {
                    catalog.setting(ADMIN_TOKEN_SETTING)?.context("the admin token's setting")?
                }
            }
        },
    };
    let runtime = Arc::new(Runtime::new(RuntimeConfig {
        cache_dir: Some(config.data_dir.join("artifacts")),
        max_module_bytes: config.max_module_bytes as usize,
        ..RuntimeConfig::default()
    })?);
    let node = Node {
        catalog: catalog.clone(),
        runtime: runtime.clone(),
        budget: Arc::new(MemoryBudget::new(config.memory_budget)),
        sources: Default::default(),
    };
    let supervisor = Supervisor::new(node, config.worker.clone(), Arc::new(Metrics::default()));
    let audit = audit::Audit::open(&config.data_dir)?;
    let control = tokio::sync::Mutex::new(());
    let sessions = console::sessions::Sessions::new(config.console_idle);
    let app = Arc::new(App {
        catalog,
        runtime,
        supervisor,
        admin_token_sha256,
        config: config.clone(),
        audit,
        control,
        sessions,
    });

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let scheme = if config.tls.is_some() { "https" } else { "http" };
    let me = cluster::Identity::new(&format!("{scheme}://{addr}"), addr.port());
    publishers::start_all(&app).await;
    let cluster = tokio::spawn(cluster::run(app.clone(), me.clone()));
    tokio::spawn(publishers::refresh_lag(app.clone()));

    let router = api::router(app.clone());
    let data = match &config.store {
        Some(url) => format!("data in {}, tables in {url}", config.data_dir.display()),
        None => format!("data in {}", config.data_dir.display()),
    };
    // The CLI's default server: elsewhere, say how to point the CLI here.
    let url = format!("{scheme}://{addr}");
    let point = if url == "http://127.0.0.1:7878" {
        String::new()
    } else {
        format!("\nthe CLI reaches it with: export WEIR_SERVER={url}")
    };
    match &config.tls {
        Some(files) => {
            let listener = tls::TlsListener::new(listener, files.clone())?;
            println!("weir serve listening on https://{addr} ({data}){point}");
            axum::serve(listener, router).with_graceful_shutdown(shutdown_signal()).await?;
        }
        None => {
            println!("weir serve listening on http://{addr} ({data}){point}");
            if !addr.ip().is_loopback() {
                // Said once, at start.
                eprintln!(
                    "weir serve: warning: {addr} is not a loopback address and this server speaks plain HTTP: tokens and connection secrets cross the network in clear. Serve HTTPS with --tls-cert and --tls-key, or listen on 127.0.0.1"
                );
            }
            axum::serve(listener, router).with_graceful_shutdown(shutdown_signal()).await?;
        }
    }
    tracing::info!("shutting down: committing the open batches");
    // No reconcile starts a worker again once the stop has begun.
    let held = app.control.lock().await;
    cluster.abort();
    app.supervisor.stop_all().await;
    drop(held);
    cluster::leave(&app, &me).await;
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
