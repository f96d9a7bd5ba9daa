//! A stream publisher's Kafka source and the connection it reads through, as
//! declared by users: checked word by word (unknown keys are errors), then
//! resolved once into what the worker runs with.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::formats::DataFormat;
pub use crate::formats::registry::SchemaRegistry;
use crate::formats::{Format, KeyFormat};

/// A `kafka-topic-in` connection: how to reach the brokers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KafkaConnection {
    /// `host:port[,host:port...]`.
    pub bootstrap_servers: String,
    /// SASL credentials, only where the broker takes them.
    pub credentials: Option<SaslCredentials>,
    /// TLS to the brokers.
    pub tls: Option<Tls>,
    /// The consumer group; defaults to `weir.<collection>`.
    pub group_id: Option<String>,
    /// librdkafka client settings passed through as they are.
    #[serde(default)]
    pub client_settings: BTreeMap<String, String>,
    /// A schema registry (Confluent-compatible, or AWS Glue): its publishers read registry-framed values.
    pub schema_registry: Option<SchemaRegistry>,
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SaslCredentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    // Secrets are never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum SaslMechanism {
    #[serde(rename = "PLAIN")]
    Plain,
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// PEM file of the CA that signed the brokers' certificates.
    pub ca_file: Option<String>,
    /// PEM files of a client certificate and its key, for mutual TLS.
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
}

impl KafkaConnection {
    /// Refuses what a shared server must not take from a tenant: settings that
    /// name files on the server, or libraries and commands librdkafka would
    /// load or run there (`plugin.library.paths`, `sasl.kerberos.kinit.cmd`, …).
    /// TLS material comes as PEM contents instead (`ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`).
    pub fn check_for_server(&self) -> Result<(), String> {
        if let Some(tls) = &self.tls
            && (tls.ca_file.is_some() || tls.cert_file.is_some() || tls.key_file.is_some())
        {
            return Err("a server does not read files a connection names: give the TLS material as PEM contents in \
                 client_settings `ssl.ca.pem`, `ssl.certificate.pem` and `ssl.key.pem`, with `security.protocol`"
                .into());
        }
        if let Some(registry) = &self.schema_registry {
            registry.check()?;
            if registry.kind == crate::formats::registry::RegistryKind::Glue && registry.access_key_id.is_none() {
                return Err(
                    "a server does not lend its own AWS credentials: the Glue registry's connection must carry \
                     `access_key_id` and `secret_access_key` (the CLI takes them from AWS_ACCESS_KEY_ID, \
                     AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN when the connection has none)"
                        .into(),
                );
            }
        }
        let refused = |key: &str| {
            key.ends_with(".location")
                || key.ends_with(".paths")
                || key.starts_with("plugin.")
                || key.starts_with("ssl.engine")
                || key.starts_with("ssl.providers")
                || key.starts_with("ssl.ca.certificate.stores")
                || key.starts_with("sasl.kerberos.")
                || key == "interceptors"
        };
        match self.client_settings.keys().find(|k| refused(k)) {
            Some(key) => Err(format!(
                "client setting `{key}` is not accepted by a server: it names a file, library or command on the server's machine"
            )),
            None => Ok(()),
        }
    }

    /// What may be shown of the connection: everything but secrets (the SASL
    /// password, and pass-through settings whose names say they hold one).
    pub fn redacted(&self) -> serde_json::Value {
        let secret = |key: &str| ["password", "secret", "token", "key.pem"].iter().any(|s| key.contains(s));
        let settings: BTreeMap<&str, &str> = self
            .client_settings
            .iter()
            .map(|(k, v)| (k.as_str(), if secret(k) { "(secret)" } else { v.as_str() }))
            .collect();
        serde_json::json!({
            "kind": "kafka-topic-in",
            "bootstrap_servers": self.bootstrap_servers,
            "credentials": self.credentials.as_ref().map(|c| serde_json::json!({
                "mechanism": c.mechanism.as_str(), "username": c.username, "password": "(secret)",
            })),
            "tls": self.tls,
            "group_id": self.group_id,
            "client_settings": settings,
            "schema_registry": self.schema_registry.as_ref().map(SchemaRegistry::redacted),
        })
    }

    /// The librdkafka settings for this connection.
    pub fn client_config(&self) -> BTreeMap<String, String> {
        let mut config = BTreeMap::new();
        config.insert("bootstrap.servers".into(), self.bootstrap_servers.clone());
        let tls = self.tls.is_some();
        let protocol = match (&self.credentials, tls) {
            (Some(_), true) => "sasl_ssl",
            (Some(_), false) => "sasl_plaintext",
            (None, true) => "ssl",
            (None, false) => "plaintext",
        };
        config.insert("security.protocol".into(), protocol.into());
        if let Some(c) = &self.credentials {
            config.insert("sasl.mechanism".into(), c.mechanism.as_str().into());
            config.insert("sasl.username".into(), c.username.clone());
            config.insert("sasl.password".into(), c.password.clone());
        }
        if let Some(t) = &self.tls {
            for (key, value) in [
                ("ssl.ca.location", &t.ca_file),
                ("ssl.certificate.location", &t.cert_file),
                ("ssl.key.location", &t.key_file),
            ] {
                if let Some(v) = value {
                    config.insert(key.into(), v.clone());
                }
            }
        }
        for (k, v) in &self.client_settings {
            config.insert(k.clone(), v.clone());
        }
        config
    }
}

/// When a batch closes, resolved from `src_cfg` and `flush_interval_mins`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rollover {
    /// `min(kafka.time_rollover_seconds, flush_interval_mins * 60)`.
    pub time: Duration,
    /// `kafka.size_rollover_mb`, in bytes.
    pub size_bytes: Option<u64>,
    /// `kafka.messages_rollover`.
    pub messages: Option<u64>,
}

/// Why a batch closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RolloverReason {
    Time,
    Size,
    Messages,
    /// The node's memory budget closed the largest buffer early.
    MemoryBudget,
    /// Graceful shutdown flushed the open batch.
    Shutdown,
    /// A change log's initial snapshot: one batch, however large.
    Snapshot,
}

impl RolloverReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Time => "time",
            Self::Size => "size",
            Self::Messages => "messages",
            Self::MemoryBudget => "memory-budget",
            Self::Shutdown => "shutdown",
            Self::Snapshot => "snapshot",
        }
    }
}

pub const DEFAULT_TIME_ROLLOVER_SECONDS: u64 = 60;

/// The `src_cfg` keys weir knows. Anything else is an error.
const SRC_CFG_KEYS: &[&str] = &[
    "kafka.time_rollover_seconds",
    "kafka.size_rollover_mb",
    "kafka.messages_rollover",
    "kafka.start_from",
    "kafka.auto_offset_reset",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SourceError {
    #[error("unknown src_cfg key `{0}`; known keys: {known}", known = SRC_CFG_KEYS.join(", "))]
    UnknownKey(String),
    #[error("src_cfg `{key}` must be a whole number greater than zero, not {value}")]
    NotPositive { key: String, value: String },
    #[error("src_cfg `kafka.size_rollover_mb` must be a number greater than zero, not {0}")]
    BadSize(String),
    #[error(
        "src_cfg `{key}` must be \"earliest\", \"latest\"{or_time}, not {value}",
        or_time = if key == &"kafka.start_from" { " or an RFC 3339 time (\"2026-12-01T00:00:00Z\")" } else { "" }
    )]
    BadStartFrom { key: &'static str, value: String },
    #[error("src_cfg sets both `kafka.start_from` and `kafka.auto_offset_reset`: keep `kafka.start_from`")]
    TwoStarts,
    #[error("flush_interval_mins must be a whole number of minutes, at least 1, not {0}")]
    BadFlushInterval(String),
    #[error("the schema {0}")]
    Schema(String),
}

/// Where a new publisher starts on a partition the catalog has no offset for
/// (`kafka.start_from`), when its consumer group has none either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    Earliest,
    Latest,
    /// The first message at or after this time (milliseconds since the epoch),
    /// or the end of the partition when there is none yet.
    Time(i64),
}

impl StartFrom {
    /// As `publisher status` shows it.
    pub fn describe(&self) -> String {
        match self {
            Self::Earliest => "earliest".into(),
            Self::Latest => "latest".into(),
            Self::Time(ms) => {
                humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis((*ms).max(0) as u64))
                    .to_string()
            }
        }
    }
}

/// `src_cfg`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceConfig {
    pub time_rollover_seconds: u64,
    pub size_rollover_mb: Option<f64>,
    pub messages_rollover: Option<u64>,
    pub start_from: StartFrom,
}

impl SourceConfig {
    pub fn parse(src_cfg: &BTreeMap<String, serde_json::Value>) -> Result<Self, SourceError> {
        if let Some(key) = src_cfg.keys().find(|k| !SRC_CFG_KEYS.contains(&k.as_str())) {
            return Err(SourceError::UnknownKey(key.clone()));
        }
        let whole = |key: &str| -> Result<Option<u64>, SourceError> {
            match src_cfg.get(key) {
                None => Ok(None),
                Some(v) => match positive_whole(v) {
                    Some(n) => Ok(Some(n)),
                    None => Err(SourceError::NotPositive { key: key.into(), value: v.to_string() }),
                },
            }
        };
        let size = match src_cfg.get("kafka.size_rollover_mb") {
            None => None,
            Some(v) => match number(v) {
                Some(mb) if mb > 0.0 && mb.is_finite() => Some(mb),
                _ => return Err(SourceError::BadSize(v.to_string())),
            },
        };
        let start_from = match (src_cfg.get("kafka.start_from"), src_cfg.get("kafka.auto_offset_reset")) {
            (Some(_), Some(_)) => return Err(SourceError::TwoStarts),
            (None, None) => StartFrom::Earliest,
            (Some(v), None) => start_from(v, "kafka.start_from", true)?,
            (None, Some(v)) => start_from(v, "kafka.auto_offset_reset", false)?,
        };
        Ok(Self {
            time_rollover_seconds: whole("kafka.time_rollover_seconds")?.unwrap_or(DEFAULT_TIME_ROLLOVER_SECONDS),
            size_rollover_mb: size,
            messages_rollover: whole("kafka.messages_rollover")?,
            start_from,
        })
    }

    /// The thresholds, with the flush interval as a ceiling on the time window.
    pub fn rollover(&self, flush_interval_mins: u64) -> Rollover {
        let seconds = self.time_rollover_seconds.min(flush_interval_mins.saturating_mul(60));
        Rollover {
            time: Duration::from_secs(seconds),
            size_bytes: self.size_rollover_mb.map(|mb| (mb * 1024.0 * 1024.0).ceil() as u64),
            messages: self.messages_rollover,
        }
    }
}

/// `"earliest"`, `"latest"`, or (when `times`) an RFC 3339 time.
fn start_from(v: &serde_json::Value, key: &'static str, times: bool) -> Result<StartFrom, SourceError> {
    match v.as_str() {
        Some("earliest") => Ok(StartFrom::Earliest),
        Some("latest") => Ok(StartFrom::Latest),
        Some(time) if times => match crate::formats::rfc3339::micros(time.trim().as_bytes()) {
            Some(us) => Ok(StartFrom::Time(us.div_euclid(1000))),
            None => Err(SourceError::BadStartFrom { key, value: v.to_string() }),
        },
        _ => Err(SourceError::BadStartFrom { key, value: v.to_string() }),
    }
}

/// Accepts `5` and `"5"`, refuses `0`, `-1`, `1.5`, `"five"`.
fn positive_whole(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().filter(|n| *n > 0),
        serde_json::Value::String(s) => s.trim().parse::<u64>().ok().filter(|n| *n > 0),
        _ => None,
    }
}

fn number(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Checks `flush_interval_mins`: a whole number of minutes, at least 1.
pub fn flush_interval(v: &serde_json::Value) -> Result<u64, SourceError> {
    positive_whole(v).filter(|_| !v.is_string()).ok_or_else(|| SourceError::BadFlushInterval(v.to_string()))
}

/// The source of a stream publisher, resolved.
#[derive(Debug, Clone)]
pub struct KafkaSource {
    pub topic: String,
    /// The declared format and schema of the messages.
    pub format: Format,
    pub config: SourceConfig,
    pub dead_letter_topic: Option<String>,
    /// How the messages' keys are encoded.
    pub key: KeyFormat,
    /// Whether rows carry the messages' headers (`_headers`).
    pub headers: bool,
    /// How the registry's subjects of this topic's schemas are named.
    pub subjects: crate::formats::registry::SubjectStrategy,
}

impl KafkaSource {
    /// A source of `topic` in `format`, keys as bytes, headers kept.
    pub fn new(topic: impl Into<String>, format: Format, config: SourceConfig) -> Self {
        Self {
            topic: topic.into(),
            format,
            config,
            dead_letter_topic: None,
            key: KeyFormat::Bytes,
            headers: true,
            subjects: Default::default(),
        }
    }
}

/// Whether a declaration's `schema` is the schema itself rather than a file's
/// path: every JSON Schema, Avro record and `.proto` message holds a `{`.
pub fn is_inline_schema(spec: &str) -> bool {
    spec.contains('{')
}

/// Reads a schema given inline as the document itself, or as a path to a
/// file relative to `base_dir` (`None`: only inline schemas, as on a server,
/// which never reads files a declaration names).
pub fn schema_text(spec: &str, base_dir: Option<&Path>) -> Result<String, SourceError> {
    if is_inline_schema(spec) {
        Ok(spec.to_string())
    } else {
        let Some(base_dir) = base_dir else {
            return Err(SourceError::Schema(format!(
                "must be given inline here, not as the path {spec:?} (`weir publisher register` inlines a schema file for you)"
            )));
        };
        let path = base_dir.join(spec.trim());
        std::fs::read_to_string(&path)
            .map_err(|e| SourceError::Schema(format!("file {} cannot be read: {e}", path.display())))
    }
}

/// Reads and parses a declared schema (see [`schema_text`] and [`Format::parse`]).
pub fn load_format(
    data_format: DataFormat,
    spec: &str,
    message: Option<&str>,
    base_dir: Option<&Path>,
) -> Result<Format, SourceError> {
    let text = schema_text(spec, base_dir)?;
    Format::parse(data_format, &text, message).map_err(SourceError::Schema)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `docs/reference/declaration.md` documents every `src_cfg` key weir knows.
    #[test]
    fn the_declaration_reference_documents_every_src_cfg_key() {
        let page = include_str!("../../../docs/reference/declaration.md");
        for key in SRC_CFG_KEYS {
            assert!(page.contains(&format!("| `{key}` |")), "docs/reference/declaration.md does not document {key}");
        }
    }

    #[test]
    fn a_server_refuses_settings_that_reach_its_files_or_run_its_commands() {
        let with = |key: &str| KafkaConnection {
            bootstrap_servers: "b:9092".into(),
            client_settings: BTreeMap::from([(key.to_string(), "x".to_string())]),
            ..KafkaConnection::default()
        };
        for key in ["plugin.library.paths", "sasl.kerberos.kinit.cmd", "ssl.key.location", "ssl.engine.location"] {
            assert!(with(key).check_for_server().unwrap_err().contains(key), "{key}");
        }
        for key in ["ssl.ca.pem", "security.protocol", "session.timeout.ms", "fetch.wait.max.ms"] {
            assert_eq!(with(key).check_for_server(), Ok(()), "{key}");
        }
        let tls =
            KafkaConnection { tls: Some(Tls { ca_file: Some("/etc/ca.pem".into()), ..Tls::default() }), ..with("a") };
        assert!(tls.check_for_server().unwrap_err().contains("PEM contents"));
    }

    fn cfg(v: serde_json::Value) -> Result<SourceConfig, SourceError> {
        let map: BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap();
        SourceConfig::parse(&map)
    }

    #[test]
    fn rollover_defaults_and_the_flush_ceiling() {
        let c = cfg(json!({})).unwrap();
        assert_eq!(c.rollover(5), Rollover { time: Duration::from_secs(60), size_bytes: None, messages: None });
        let c = cfg(json!({"kafka.time_rollover_seconds": 600, "kafka.size_rollover_mb": 1.5, "kafka.messages_rollover": "1000"})).unwrap();
        let r = c.rollover(2);
        assert_eq!(r.time, Duration::from_secs(120), "flush_interval_mins * 60 caps the window");
        assert_eq!(r.size_bytes, Some(1_572_864));
        assert_eq!(r.messages, Some(1000));
        assert_eq!(cfg(json!({"kafka.time_rollover_seconds": 30})).unwrap().rollover(5).time, Duration::from_secs(30));
    }

    #[test]
    fn bad_src_cfg_is_an_error_with_the_key() {
        let cases = [
            (
                json!({"kafka.time_rollover_secs": 5}),
                "unknown src_cfg key `kafka.time_rollover_secs`; known keys: kafka.time_rollover_seconds, kafka.size_rollover_mb, kafka.messages_rollover, kafka.start_from, kafka.auto_offset_reset",
            ),
            (
                json!({"kafka.time_rollover_seconds": 0}),
                "src_cfg `kafka.time_rollover_seconds` must be a whole number greater than zero, not 0",
            ),
            (
                json!({"kafka.messages_rollover": -5}),
                "src_cfg `kafka.messages_rollover` must be a whole number greater than zero, not -5",
            ),
            (
                json!({"kafka.messages_rollover": "many"}),
                "src_cfg `kafka.messages_rollover` must be a whole number greater than zero, not \"many\"",
            ),
            (
                json!({"kafka.time_rollover_seconds": 1.5}),
                "src_cfg `kafka.time_rollover_seconds` must be a whole number greater than zero, not 1.5",
            ),
            (
                json!({"kafka.size_rollover_mb": 0}),
                "src_cfg `kafka.size_rollover_mb` must be a number greater than zero, not 0",
            ),
            (
                json!({"kafka.auto_offset_reset": "middle"}),
                "src_cfg `kafka.auto_offset_reset` must be \"earliest\", \"latest\", not \"middle\"",
            ),
            (
                json!({"kafka.start_from": "yesterday"}),
                "src_cfg `kafka.start_from` must be \"earliest\", \"latest\" or an RFC 3339 time (\"2026-12-01T00:00:00Z\"), not \"yesterday\"",
            ),
            (
                json!({"kafka.start_from": "latest", "kafka.auto_offset_reset": "latest"}),
                "src_cfg sets both `kafka.start_from` and `kafka.auto_offset_reset`: keep `kafka.start_from`",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(cfg(input.clone()).unwrap_err().to_string(), expected, "{input}");
        }
    }

    #[test]
    fn a_start_is_a_position_or_a_time() {
        assert_eq!(cfg(json!({})).unwrap().start_from, StartFrom::Earliest);
        assert_eq!(cfg(json!({"kafka.auto_offset_reset": "latest"})).unwrap().start_from, StartFrom::Latest);
        let at = cfg(json!({"kafka.start_from": "2026-12-01T10:00:00.5+01:00"})).unwrap().start_from;
        assert_eq!(at, StartFrom::Time(1_796_115_600_500));
        assert_eq!(at.describe(), "2026-12-01T09:00:00.500Z");
    }

    #[test]
    fn flush_interval_is_whole_minutes() {
        assert_eq!(flush_interval(&json!(5)), Ok(5));
        for bad in [json!(0), json!(-1), json!(1.5), json!("5")] {
            assert_eq!(
                flush_interval(&bad).unwrap_err().to_string(),
                format!("flush_interval_mins must be a whole number of minutes, at least 1, not {bad}")
            );
        }
    }

    #[test]
    fn connection_settings() {
        let conn = KafkaConnection {
            bootstrap_servers: "b:9092".into(),
            credentials: Some(SaslCredentials {
                mechanism: SaslMechanism::ScramSha512,
                username: "u".into(),
                password: "secret".into(),
            }),
            tls: Some(Tls { ca_file: Some("/ca.pem".into()), ..Tls::default() }),
            group_id: None,
            client_settings: [("fetch.max.bytes".to_string(), "1000".to_string())].into(),
            schema_registry: Some(SchemaRegistry {
                url: "https://registry:8081".into(),
                username: Some("svc".into()),
                password: Some("registry-secret".into()),
                ..SchemaRegistry::default()
            }),
        };
        let c = conn.client_config();
        assert_eq!(c["security.protocol"], "sasl_ssl");
        assert_eq!(c["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(c["ssl.ca.location"], "/ca.pem");
        assert_eq!(c["fetch.max.bytes"], "1000");
        assert!(!format!("{conn:?}").contains("secret"), "secrets are never printed");
        let shown = conn.redacted().to_string();
        assert!(!shown.contains("registry-secret") && shown.contains("https://registry:8081"), "{shown}");

        let glue = SchemaRegistry {
            kind: crate::formats::registry::RegistryKind::Glue,
            region: Some("eu-west-1".into()),
            registry_name: Some("orders".into()),
            access_key_id: Some("AKIAEXAMPLE".into()),
            secret_access_key: Some("aws-secret".into()),
            session_token: Some("aws-token".into()),
            ..SchemaRegistry::default()
        };
        let conn = KafkaConnection { schema_registry: Some(glue.clone()), tls: None, ..conn };
        assert!(!format!("{conn:?}").contains("aws-"), "secrets are never printed");
        let shown = conn.redacted().to_string();
        assert!(!shown.contains("aws-secret") && !shown.contains("aws-token") && shown.contains("orders"), "{shown}");
        assert_eq!(glue.location(), "https://glue.eu-west-1.amazonaws.com (AWS Glue registry orders in eu-west-1)");
        conn.check_for_server().unwrap();
        let lent = KafkaConnection {
            schema_registry: Some(SchemaRegistry { access_key_id: None, secret_access_key: None, ..glue.clone() }),
            ..conn.clone()
        };
        assert!(lent.check_for_server().unwrap_err().contains("does not lend its own AWS credentials"));
        let mixed = SchemaRegistry { url: "https://registry:8081".into(), ..glue };
        assert!(mixed.check().unwrap_err().contains("`url` belong to another kind of registry"));
        assert!(SchemaRegistry::default().check().unwrap_err().contains("needs `url`"));
    }
}
