//! HTTPS for `weir serve`: rustls on the listener. The certificate and key
//! are read again on SIGHUP, so they rotate without a restart; connections
//! made before keep the certificate they were made with. Handshakes run off
//! the accept loop, each within a deadline, so a slow or silent client holds
//! up no one else.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context as _;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

/// The PEM files a server's certificate comes from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain, the server's own first.
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    fn load(&self) -> anyhow::Result<Arc<ServerConfig>> {
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .with_context(|| format!("reading the TLS certificate {}", self.cert.display()))?;
        anyhow::ensure!(
            !certs.is_empty(),
            "the TLS certificate {} holds no certificate (PEM: -----BEGIN CERTIFICATE-----)",
            self.cert.display()
        );
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .with_context(|| format!("reading the TLS key {} (PEM, PKCS#8, PKCS#1 or SEC1)", self.key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .with_context(|| {
                format!("the TLS key {} does not go with the certificate {}", self.key.display(), self.cert.display())
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A listener whose connections have finished their TLS handshake.
pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Serves `files`' certificate on `tcp`, re-reading it on each SIGHUP.
    pub fn new(tcp: TcpListener, files: TlsFiles) -> anyhow::Result<Self> {
        let config = Arc::new(RwLock::new(files.load()?));
        let local = tcp.local_addr()?;
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        let (sender, accepted) = mpsc::channel(64);
        tokio::spawn(accept(tcp, config.clone(), sender));
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match files.load() {
                    Ok(new) => {
                        *config.write().unwrap_or_else(|e| e.into_inner()) = new;
                        eprintln!("weir serve: SIGHUP: serving the certificate in {} now", files.cert.display());
                    }
                    Err(e) => eprintln!("weir serve: SIGHUP: kept the certificate served so far: {e:#}"),
                }
            }
        });
        Ok(Self { accepted, local })
    }
}

async fn accept(
    tcp: TcpListener,
    config: Arc<RwLock<Arc<ServerConfig>>>,
    sender: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    while !sender.is_closed() {
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait rather than spin.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = TlsAcceptor::from(config.read().unwrap_or_else(|e| e.into_inner()).clone());
        let sender = sender.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = sender.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                Err(_) => tracing::debug!(%peer, "TLS handshake took over {HANDSHAKE_DEADLINE:?}"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accept loop only ends once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
