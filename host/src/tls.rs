//! Trust for weir's HTTP clients (the schema registry's, the CLI's): a CA
//! given as PEM, or the system's roots.

use std::sync::Arc;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

/// Trusts only the certificates in `pem` (`whose` names them in errors).
pub fn trusting(pem: &[u8], whose: &str) -> Result<TlsConfig, String> {
    let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(c)) => Some(Ok(c)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{whose} is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{whose} holds no certificate (PEM: -----BEGIN CERTIFICATE-----)"));
    }
    Ok(TlsConfig::builder().root_certs(RootCerts::Specific(Arc::new(certs))).build())
}

/// Trusts the roots the operating system trusts.
pub fn system_roots() -> TlsConfig {
    TlsConfig::builder().root_certs(RootCerts::PlatformVerifier).build()
}
