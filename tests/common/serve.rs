//! A real `weir serve` process on a loopback port (port 0), an embedded
//! broker for it to read, and the `weir` CLI and plain HTTP to talk to it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir::embedded::broker::EmbeddedBroker;

pub const ADMIN: &str = "admin-token-for-tests";

pub struct Server {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
    /// What it printed before it listened.
    pub banner: Vec<String>,
    /// The CA the CLI is told to trust (`WEIR_CA_FILE`), for HTTPS.
    pub ca_file: Option<PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `weir serve` on `data_dir` and waits until it listens.
    pub fn start(data_dir: &Path) -> Self {
        Self::start_with(data_dir, &[])
    }

    /// The same, with more `weir serve` arguments.
    pub fn start_with(data_dir: &Path, args: &[&str]) -> Self {
        Self::start_with_env(data_dir, args, &[])
    }

    /// The same, with more environment (a bucket's `AWS_*` settings).
    pub fn start_with_env(data_dir: &Path, args: &[&str], env: &[(&str, String)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--listen", "127.0.0.1:0", "--lag-interval", "1s", "--shutdown-deadline", "10s"])
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("WEIR_ADMIN_TOKEN", ADMIN)
            // `WEIR_TEST_LOG` (a `RUST_LOG` value) to see more of what a test's server does.
            .env("RUST_LOG", std::env::var("WEIR_TEST_LOG").unwrap_or_else(|_| "weir=warn".into()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("weir serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut banner = Vec::new();
        let url = loop {
            let line = lines.next().expect("weir serve exited before listening").expect("stdout line");
            if let Some(rest) = line.strip_prefix("weir serve listening on ") {
                break rest.split_whitespace().next().expect("url").to_string();
            }
            banner.push(line);
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, url, data_dir: data_dir.to_path_buf(), banner, ca_file: None }
    }

    /// The server's process id (to read its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGKILL: no graceful anything.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "weir serve exited with {status}");
    }

    /// Sends a signal by name (`HUP`, `TERM`, …).
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status();
        assert!(sent.expect("kill").success(), "kill -{name}");
    }

    /// Runs the `weir` CLI against this server.
    pub fn cli(&self, token: &str, args: &[&str]) -> Output {
        self.cli_env(token, args, &[])
    }

    /// The CLI with more environment (`AWS_*` credentials it sends along).
    pub fn cli_env(&self, token: &str, args: &[&str], env: &[(&str, String)]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
        command.args(args).env("WEIR_SERVER", &self.url).env("WEIR_TOKEN", token);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(ca) = &self.ca_file {
            command.env("WEIR_CA_FILE", ca);
        }
        command.output().expect("weir")
    }

    /// Runs the CLI, expecting success; returns stdout.
    pub fn cli_ok(&self, token: &str, args: &[&str]) -> String {
        let out = self.cli(token, args);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "weir {args:?} failed\nstdout: {stdout}\nstderr: {stderr}");
        stdout.into_owned()
    }

    /// Runs the CLI with `--output json`, expecting success.
    pub fn cli_json(&self, token: &str, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.extend(["--output", "json"]);
        let out = self.cli_ok(token, &args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("weir {args:?}: not JSON ({e}): {out}"))
    }

    /// A GET whose answer is text (`/metrics`), with `token`.
    pub fn text(&self, path: &str, token: &str) -> String {
        let mut response =
            ureq::get(format!("{}{path}", self.url)).header("Authorization", format!("Bearer {token}")).call().unwrap();
        response.body_mut().read_to_string().unwrap()
    }

    /// A plain HTTP request; returns the status and the JSON answer (or `null`).
    pub fn http(&self, method: &str, path: &str, token: Option<&str>, body: Option<Body>) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let url = format!("{}{path}", self.url);
        fn auth<B>(request: ureq::RequestBuilder<B>, token: Option<&str>) -> ureq::RequestBuilder<B> {
            match token {
                Some(t) => request.header("Authorization", format!("Bearer {t}")),
                None => request,
            }
        }
        let response = match (method, body) {
            ("GET", None) => auth(agent.get(&url), token).call(),
            ("DELETE", None) => auth(agent.delete(&url), token).call(),
            ("POST", Some(Body::Json(v))) => auth(agent.post(&url), token).send_json(&v),
            ("POST", Some(Body::Bytes(b))) => auth(agent.post(&url), token).send(&b[..]),
            ("POST", None) => auth(agent.post(&url), token).send_empty(),
            ("PUT", Some(Body::Json(v))) => auth(agent.put(&url), token).send_json(&v),
            other => panic!("unsupported request {other:?}"),
        };
        let mut response = response.expect("HTTP request");
        let status = response.status().as_u16();
        let text = response.body_mut().with_config().limit(1 << 30).read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Creates a tenant with the admin token; returns its token.
    pub fn tenant(&self, name: &str, quotas: Value) -> String {
        let (status, answer) =
            self.http("POST", "/v1/tenants", Some(ADMIN), Some(Body::Json(json!({"name": name, "quotas": quotas}))));
        assert_eq!(status, 201, "{answer}");
        answer["token"].as_str().expect("token").to_string()
    }

    /// Polls the table's versions until they hold `rows` rows.
    pub fn wait_for_rows(&self, token: &str, collection: &str, table: &str, rows: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, versions) =
                self.http("GET", &format!("/v1/collections/{collection}/tables/{table}/versions"), Some(token), None);
            let committed: u64 = if status == 200 {
                // A reprocess's version removes rows.
                let rows = |v: &Value| v["rows"].as_u64().unwrap() - v["removed_rows"].as_u64().unwrap_or(0);
                versions.as_array().unwrap().iter().map(rows).sum()
            } else {
                0
            };
            if committed >= rows {
                assert_eq!(committed, rows, "more rows than produced: {versions}");
                return versions;
            }
            assert!(Instant::now() < deadline, "timed out with {committed} of {rows} rows in {collection}/{table}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[derive(Debug)]
pub enum Body {
    Json(Value),
    Bytes(Vec<u8>),
}

/// A broker with topic `clicks` (3 partitions).
pub fn broker() -> EmbeddedBroker {
    let broker = EmbeddedBroker::start(1).expect("embedded broker");
    broker.create_topic("clicks", 3).expect("topic");
    broker
}

/// The seed's declaration, with the schema as a file beside it; returns its path.
pub fn declaration(dir: &Path, src_cfg: &str) -> PathBuf {
    std::fs::write(dir.join("clicks.json"), super::stream::CLICKS_SCHEMA).unwrap();
    let text = format!(
        "name = \"read_clicks\"\nflush_interval_mins = 5\noutput_tables = [\"clicks\"]\n\n[source.kafka]\ntopic = \"clicks\"\ndata_format = \"json\"\nschema = \"clicks.json\"\n\n[source.kafka.src_cfg]\n{src_cfg}\n"
    );
    let path = dir.join("read_clicks.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Every `event_id` in a parquet file.
pub fn event_ids(parquet: &Path) -> Vec<String> {
    let frame = weir::input::read(parquet, None).expect("read parquet");
    let mut ids = Vec::new();
    for batch in frame.batches {
        let col = batch.column_by_name("event_id").expect("event_id");
        let col = col.as_any().downcast_ref::<arrow::array::StringArray>().expect("utf8");
        ids.extend(col.iter().flatten().map(str::to_string));
    }
    ids
}

pub fn plugin_path() -> String {
    guest_file("read_clicks")
}

/// A Rust guest component's path (`read-clicks`, `passthrough`, ...).
pub fn guest_file(name: &str) -> String {
    super::guest_path(name).display().to_string()
}

pub const QUICK: &str = "\"kafka.messages_rollover\" = 100\n\"kafka.time_rollover_seconds\" = 2";

/// A tenant `acme` with collection `events` on `bootstrap` and the seed's publisher registered.
pub fn registered(server: &Server, dir: &Path, bootstrap: &str) -> String {
    // A short session: after a kill -9 the group waits out the dead member's session before it rebalances.
    registered_with(server, dir, bootstrap, &["session.timeout.ms=6000", "heartbeat.interval.ms=500"])
}

/// The same, with these client settings (`KEY=VALUE`) on the connection.
pub fn registered_with(server: &Server, dir: &Path, bootstrap: &str, settings: &[&str]) -> String {
    let settings: Vec<&str> = settings.iter().flat_map(|s| ["--client-setting", s]).collect();
    registered_in(server, dir, bootstrap, &settings, "")
}

/// The same, with `top` (top-level keys) in the publisher's declaration.
pub fn registered_declaring(server: &Server, dir: &Path, bootstrap: &str, top: &str) -> String {
    registered_in(server, dir, bootstrap, &[], top)
}

/// As [`registered_declaring`], the collection created with more arguments (`--table-format iceberg`).
pub fn registered_in(server: &Server, dir: &Path, bootstrap: &str, collection: &[&str], top: &str) -> String {
    let token = server.tenant("acme", json!({}));
    let mut args = vec!["collection", "create", "events", "--bootstrap-servers", bootstrap];
    args.extend(collection);
    server.cli_ok(&token, &args);
    let decl = declaration(dir, QUICK);
    let text = std::fs::read_to_string(&decl).unwrap().replacen("[source.kafka]", &format!("{top}\n[source.kafka]"), 1);
    std::fs::write(&decl, text).unwrap();
    server.cli_ok(&token, &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", &plugin_path()]);
    token
}

pub fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
