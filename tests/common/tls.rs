//! TLS for the tests: a CA made in the test (rcgen), certificates it signs,
//! and stunnel (Debian's, installed by scripts/setup.sh) putting TLS in
//! front of a broker that speaks plain Kafka.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};

/// A certificate authority of the test's own.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// Its certificate, PEM.
    pub pem: String,
}

/// A certificate and its key, as PEM text and as files.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let pem = issuer.pem();
        Self { issuer, pem }
    }

    /// Writes the CA's certificate to `path`.
    pub fn write(&self, path: &Path) -> PathBuf {
        std::fs::write(path, &self.pem).unwrap();
        path.to_path_buf()
    }

    /// A certificate for 127.0.0.1 and localhost (server or client), written
    /// as `<dir>/<name>.pem` and `<dir>/<name>.key`.
    pub fn issue(&self, dir: &Path, name: &str) -> Issued {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let issued = Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&issued.cert, &issued.cert_pem).unwrap();
        std::fs::write(&issued.key, &issued.key_pem).unwrap();
        issued
    }
}

/// stunnel accepting TLS on a loopback port and forwarding plain TCP.
pub struct Stunnel {
    child: Child,
    /// `127.0.0.1:<port>`, where it accepts TLS.
    pub address: String,
}

impl Drop for Stunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Stunnel {
    /// TLS on `port` with `server`'s certificate, forwarded to `to`; with
    /// `client_ca`, only clients with a certificate that CA signed get through.
    pub fn start(dir: &Path, port: u16, to: &str, server: &Issued, client_ca: Option<&Path>) -> Self {
        let address = format!("127.0.0.1:{port}");
        let mut conf = format!(
            "foreground = yes\npid =\n[kafka]\naccept = {address}\nconnect = {to}\ncert = {}\nkey = {}\n",
            server.cert.display(),
            server.key.display()
        );
        if let Some(ca) = client_ca {
            conf.push_str(&format!("CAfile = {}\nverifyChain = yes\nrequireCert = yes\n", ca.display()));
        }
        let path = dir.join(format!("stunnel-{port}.conf"));
        std::fs::write(&path, conf).unwrap();
        let child = Command::new("stunnel")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting stunnel: {e} (scripts/setup.sh installs it)"));
        super::wait_for_listener(&address);
        Self { child, address }
    }
}
