//! The client side of `weir serve`'s API: one HTTP client, and how answers
//! are printed (aligned tables for people, JSON for scripts).

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use comfy_table::{Table, presets::NOTHING};
use serde_json::Value;
use ureq::http::Response;

use super::Output;

#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The weir server.
    #[arg(long, env = "WEIR_SERVER", default_value = "http://127.0.0.1:7878", global = true)]
    server: String,
    /// The CA that signed an HTTPS server's certificate (PEM) [default: the system's roots].
    #[arg(long, env = "WEIR_CA_FILE", global = true)]
    ca_file: Option<std::path::PathBuf>,
    /// Your tenant's token (or the admin token, for `weir tenant`).
    #[arg(long, env = "WEIR_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// How results are printed.
    #[arg(long, value_enum, default_value_t = Output::Table, global = true)]
    pub output: Output,
}

/// A client subcommand: where the server is, and what to ask it.
#[derive(Debug, clap::Args)]
pub struct Remote<C: clap::Subcommand> {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(subcommand)]
    pub command: C,
}

pub struct Client {
    agent: ureq::Agent,
    server: String,
    token: Option<String>,
    pub output: Output,
}

impl Client {
    pub fn new(args: &ServerArgs) -> anyhow::Result<Self> {
        let tls = match &args.ca_file {
            Some(path) => {
                let pem = std::fs::read(path).with_context(|| format!("reading the CA file {}", path.display()))?;
                weir::tls::trusting(&pem, &format!("the CA file {}", path.display())).map_err(anyhow::Error::msg)?
            }
            None => weir::tls::system_roots(),
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(300)))
            .tls_config(tls)
            .build()
            .into();
        Ok(Self {
            agent,
            server: args.server.trim_end_matches('/').to_string(),
            token: args.token.clone(),
            output: args.output,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server)
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token.as_deref().unwrap_or_default())
    }

    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.answer(self.agent.get(self.url(path)).header("Authorization", self.bearer()).call())
    }

    pub fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.answer(self.agent.delete(self.url(path)).header("Authorization", self.bearer()).call())
    }

    pub fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.answer(self.agent.post(self.url(path)).header("Authorization", self.bearer()).send_json(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.answer(self.agent.put(self.url(path)).header("Authorization", self.bearer()).send_json(body))
    }

    pub fn post_bytes(&self, path: &str, bytes: &[u8], content_type: &str) -> anyhow::Result<Value> {
        let request = self.agent.post(self.url(path)).header("Authorization", self.bearer()).content_type(content_type);
        self.answer(request.send(bytes))
    }

    /// Streams a binary answer into `out`; returns the bytes written.
    pub fn download(&self, path: &str, out: &Path) -> anyhow::Result<u64> {
        let response = self.agent.get(self.url(path)).header("Authorization", self.bearer()).call();
        let mut response = self.checked(response)?;
        let tmp = out.with_extension("part");
        let mut file = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let written = std::io::copy(&mut response.body_mut().as_reader(), &mut file).context("downloading")?;
        std::fs::rename(&tmp, out).with_context(|| format!("writing {}", out.display()))?;
        Ok(written)
    }

    fn checked(&self, response: Result<Response<ureq::Body>, ureq::Error>) -> anyhow::Result<Response<ureq::Body>> {
        let mut response = response.map_err(|e| match e {
            ureq::Error::Rustls(_) | ureq::Error::Tls(_) => untrusted(&self.server, &e),
            ureq::Error::Io(io) if io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) => {
                untrusted(&self.server, &io)
            }
            e => anyhow::anyhow!(
                "cannot reach the weir server at {}: {e}. Start it with `weir serve`, or point --server (WEIR_SERVER) at it",
                self.server
            ),
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
            .unwrap_or(text);
        bail!("{message} (HTTP {})", status.as_u16())
    }

    fn answer(&self, response: Result<Response<ureq::Body>, ureq::Error>) -> anyhow::Result<Value> {
        let mut response = self.checked(response)?;
        let text = response.body_mut().with_config().limit(1 << 30).read_to_string().context("reading the answer")?;
        serde_json::from_str(&text).context("the server's answer is not JSON")
    }

    /// Prints `value` as JSON, or as a table with `columns` (header, JSON field) when people read it.
    pub fn print_list(&self, value: &Value, columns: &[(&str, &str)]) {
        match self.output {
            Output::Json => print_json(value),
            Output::Table => {
                let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
                if items.is_empty() {
                    println!("(none)");
                    return;
                }
                let rows = items.iter().map(|item| columns.iter().map(|(_, field)| cell(&item[*field])).collect());
                print_rows(&columns.iter().map(|(h, _)| *h).collect::<Vec<_>>(), rows);
            }
        }
    }

    /// Prints `value` as JSON, or runs `people` to print it for people.
    pub fn print(&self, value: &Value, people: impl FnOnce(&Value)) {
        match self.output {
            Output::Json => print_json(value),
            Output::Table => people(value),
        }
    }
}

/// The commands that make a CA and a server certificate it signs (for localhost and 127.0.0.1).
pub const MAKE_CERTIFICATES: &str = "\
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 365 -subj /CN=weir-ca
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -extfile server.ext -out server.pem
    weir serve --tls-cert server.pem --tls-key server.key      # and the CLI: --ca-file ca.pem";

fn untrusted(server: &str, e: &dyn std::fmt::Display) -> anyhow::Error {
    // `openssl req -x509`, the usual way to make a self-signed certificate, makes a CA's.
    if e.to_string().contains("CaUsedAsEndEntity") {
        return anyhow::anyhow!(
            "the weir server at {server} cannot be trusted: {e}. Its certificate is a CA's (as `openssl req -x509` \
             makes one), which TLS clients do not take as a server's own, even given with --ca-file. Make a CA and a \
             server certificate it signs (add the server's other names to subjectAltName), serve that one and give \
             the CA with --ca-file:\n{MAKE_CERTIFICATES}"
        );
    }
    anyhow::anyhow!(
        "the weir server at {server} cannot be trusted: {e}. If its certificate is signed by your own CA, give that CA \
         with --ca-file (WEIR_CA_FILE)"
    )
}

pub fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).expect("json"));
}

pub fn print_rows(headers: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let mut table = Table::new();
    table.load_style(NOTHING).set_header(headers.iter().map(|h| h.to_uppercase()));
    for row in rows {
        table.add_row(row);
    }
    println!("{table}");
}

/// A JSON value as a table cell: strings bare, times readable, nothing as `-`.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// A query string's value: unreserved characters as they are, the rest %-encoded.
pub fn query_value(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Milliseconds since the epoch as an RFC 3339 time (UTC).
pub fn time(ms: &Value) -> String {
    match ms.as_i64() {
        Some(ms) => humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms as u64)).to_string(),
        None => "-".into(),
    }
}

/// `collection/name` → (collection, name).
pub fn address<'a>(text: &'a str, what: &str) -> anyhow::Result<(&'a str, &'a str)> {
    text.split_once('/')
        .filter(|(c, n)| !c.is_empty() && !n.is_empty() && !n.contains('/'))
        .with_context(|| format!("{text:?}: name the {what} as COLLECTION/NAME, e.g. events/read_clicks"))
}
