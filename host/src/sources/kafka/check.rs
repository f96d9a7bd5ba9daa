//! Checking a connection before a publisher is registered on it: the brokers
//! answer, take the credentials and TLS, and the topic exists; and saying
//! what a refusal means to the person who wrote the connection.

use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

use crate::publisher::source::KafkaConnection;

/// What a connection check found.
#[derive(Debug, Clone)]
pub struct BrokerCheck {
    pub brokers: usize,
    /// The topic's partitions with their low and high watermarks, when a topic was asked for.
    pub partitions: Option<Vec<Watermarks>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Watermarks {
    pub partition: i32,
    pub low: i64,
    pub high: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(
        "cannot reach the Kafka brokers at {servers}: {detail}. Check bootstrap_servers, the credentials and TLS settings, and that the brokers are up"
    )]
    Unreachable { servers: String, detail: String },
    /// The brokers answered and refused: credentials, mechanism or TLS.
    #[error("{0}")]
    Refused(String),
    #[error("topic `{topic}` does not exist on the brokers at {servers}: create it first, or correct the topic name")]
    NoTopic { topic: String, servers: String },
    #[error("the connection's client settings are invalid: {0}")]
    Config(String),
}

/// What refused a check, as librdkafka reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    Credentials,
    Mechanism,
    Tls,
}

/// Keeps what librdkafka reports while a check runs: a broker refusing the
/// credentials, the mechanism or the TLS handshake is reported only as an
/// error event or a log line, not as the failure of the request waiting.
#[derive(Default)]
struct CheckContext {
    refused: std::sync::Mutex<Option<(Refusal, String)>>,
}

/// Whether librdkafka's report is a broker refusing this client, and how.
pub(super) fn classify(code: Option<rdkafka::types::RDKafkaErrorCode>, reason: &str) -> Option<Refusal> {
    use rdkafka::types::RDKafkaErrorCode as Code;
    if code == Some(Code::Authentication) {
        Some(Refusal::Credentials)
    } else if reason.contains("mechanism handshake failed") {
        Some(Refusal::Mechanism)
    } else if code == Some(Code::SSL) || reason.contains("SSL routines") || reason.contains("SSL handshake failed") {
        Some(Refusal::Tls)
    } else {
        None
    }
}

impl CheckContext {
    fn note(&self, code: Option<rdkafka::types::RDKafkaErrorCode>, reason: &str) {
        if let Some(refusal) = classify(code, reason) {
            self.refused.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert((refusal, reason.to_string()));
        }
    }
}

impl ClientContext for CheckContext {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.note(error.rdkafka_error_code(), reason);
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.note(None, log_message);
        tracing::debug!(facility = fac, ?level, "librdkafka during a connection check: {log_message}");
    }
}

impl ConsumerContext for CheckContext {}

/// librdkafka's reason without the broker's address in front, the state
/// timing behind, or `prefix`: `ssl://h:p/bootstrap: SSL handshake failed: X
/// (after 9ms in state SSL_HANDSHAKE)` → `X`.
fn reason_detail<'a>(reason: &'a str, prefix: &str) -> &'a str {
    let detail = reason.split_once("/bootstrap: ").map_or(reason, |(_, rest)| rest);
    let detail = detail.rsplit_once(" (after ").map_or(detail, |(d, _)| d);
    detail.split_once(prefix).map_or(detail, |(_, rest)| rest).trim()
}

/// What a refusal means for the person who wrote the connection.
pub(super) fn refusal(connection: &KafkaConnection, refusal: Refusal, reason: &str) -> CheckError {
    let servers = &connection.bootstrap_servers;
    let mechanism = connection.credentials.as_ref().map_or("(none)", |c| c.mechanism.as_str());
    let message = match refusal {
        Refusal::Tls => format!(
            "the TLS handshake with the brokers at {servers} failed: {}. Check the CA that signed the brokers' \
             certificates (ssl.ca.pem) and, where the brokers ask for one, the client certificate and key \
             (ssl.certificate.pem, ssl.key.pem)",
            // librdkafka's own hint names ssl.ca.location, a file a server does not read.
            reason_detail(reason, "SSL handshake failed: ")
                .split(": broker certificate could not be verified")
                .next()
                .unwrap_or_default()
        ),
        Refusal::Mechanism => format!(
            "the brokers at {servers} do not take SASL mechanism {mechanism}: {}. Use one they take",
            reason_detail(reason, "handshake failed: ")
        ),
        Refusal::Credentials => match &connection.credentials {
            Some(c) => format!(
                "the broker refused the credentials for user {} ({mechanism}): {}. Check the username, password and \
                 mechanism",
                c.username,
                reason_detail(reason, "SASL authentication error: ")
            ),
            None => format!(
                "the brokers at {servers} refused this client: {}. If they take SASL, give the connection credentials",
                reason_detail(reason, "SASL authentication error: ")
            ),
        },
    };
    CheckError::Refused(message)
}

/// Checks that the brokers answer and, with a topic, that it exists and how
/// far each of its partitions reaches. Blocking; never creates the topic.
/// A broker that refuses the credentials or the TLS handshake fails the
/// check at once, saying which.
pub fn check(connection: &KafkaConnection, topic: Option<&str>, timeout: Duration) -> Result<BrokerCheck, CheckError> {
    let mut config = ClientConfig::new();
    for (k, v) in connection.client_config() {
        config.set(k, v);
    }
    config.set("allow.auto.create.topics", "false");
    // A refused SASL mechanism is only ever a log line at this level.
    config.set_log_level(rdkafka::config::RDKafkaLogLevel::Error);
    let consumer: BaseConsumer<CheckContext> =
        config.create_with_context(CheckContext::default()).map_err(|e| CheckError::Config(e.to_string()))?;
    let servers = connection.bootstrap_servers.clone();
    let unreachable =
        |e: rdkafka::error::KafkaError| CheckError::Unreachable { servers: servers.clone(), detail: e.to_string() };
    let refused = || consumer.context().refused.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let deadline = std::time::Instant::now() + timeout;
    let metadata = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match consumer.fetch_metadata(topic, left.min(Duration::from_millis(250))) {
            Ok(metadata) => break metadata,
            Err(e) => {
                // Serves the error events queued meanwhile (a consumer's poll does; a metadata request does not).
                let _ = consumer.poll(Duration::ZERO);
                if let Some((refused, reason)) = refused() {
                    return Err(refusal(connection, refused, &reason));
                }
                if left.is_zero() {
                    return Err(unreachable(e));
                }
            }
        }
    };
    let brokers = metadata.brokers().len();
    let Some(topic) = topic else { return Ok(BrokerCheck { brokers, partitions: None }) };
    let found =
        metadata.topics().iter().find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty());
    let Some(found) = found else { return Err(CheckError::NoTopic { topic: topic.into(), servers }) };
    let mut partitions = Vec::with_capacity(found.partitions().len());
    for p in found.partitions() {
        let (low, high) = consumer.fetch_watermarks(topic, p.id(), timeout).map_err(unreachable)?;
        partitions.push(Watermarks { partition: p.id(), low, high });
    }
    partitions.sort_by_key(|w| w.partition);
    Ok(BrokerCheck { brokers, partitions: Some(partitions) })
}
