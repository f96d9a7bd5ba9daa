//! An S3 peer: moto's server (PyPI `moto[server]`, installed by
//! scripts/setup.sh; it honours conditional PUT, as weir's put-if-absent
//! needs) on a loopback port, with one bucket. Clients reach it through a
//! relay of ours that can be cut (every connection dropped, new ones closed at
//! once) and restored: a storage outage without losing the bucket, which lives
//! in moto's memory.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub struct S3 {
    child: Child,
    /// The relay's URL: what weir is given as `AWS_ENDPOINT_URL`.
    pub endpoint: String,
    /// moto's own URL, for readers that are not under test.
    pub direct: String,
    pub bucket: String,
    down: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl S3 {
    /// moto on a free port with `bucket` created, and a relay in front.
    pub fn start(bucket: &str) -> Self {
        let port = super::free_port();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto's server: run scripts/setup.sh (it installs moto[server])");
        let address = format!("127.0.0.1:{port}");
        super::wait_for_listener(&address);
        let relay = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", relay.local_addr().unwrap());
        let (down, live) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let (relay_down, relay_live, upstream) = (down.clone(), live.clone(), address.clone());
        std::thread::spawn(move || {
            for client in relay.incoming().flatten() {
                if relay_down.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                relay_live.lock().unwrap().extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        let s3 = Self { child, endpoint, direct: format!("http://{address}"), bucket: bucket.into(), down, live };
        let created = ureq::put(format!("{}/{bucket}", s3.direct)).send_empty();
        assert!(created.is_ok(), "creating bucket {bucket} in moto: {created:?}");
        s3
    }

    /// `s3://BUCKET/PREFIX`, for `weir serve --store`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// The environment a client of the relay needs (moto takes any credentials).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "weir-tests".into()),
            ("AWS_SECRET_ACCESS_KEY", "weir-tests".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// The same, straight to moto: for readers that stay up through an outage.
    pub fn direct_env(&self) -> Vec<(&'static str, String)> {
        let mut env = self.env();
        env[0].1 = self.direct.clone();
        env
    }

    /// moto's Glue registry `weir` (us-east-1) at `endpoint` (the relay's or moto's own URL), as a connection names it.
    pub fn glue(&self, endpoint: &str) -> weir::publisher::source::SchemaRegistry {
        weir::publisher::source::SchemaRegistry {
            kind: weir::formats::registry::RegistryKind::Glue,
            region: Some("us-east-1".into()),
            registry_name: Some("weir".into()),
            endpoint: Some(endpoint.into()),
            access_key_id: Some("weir-tests".into()),
            secret_access_key: Some("weir-tests".into()),
            ..Default::default()
        }
    }

    /// Cuts the store off (`true`) or brings it back (`false`).
    pub fn outage(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            for stream in self.live.lock().unwrap().drain(..) {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}
