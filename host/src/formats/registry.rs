//! Schema registries, whichever kind: a connection's settings, which writer
//! schema framed a message, subjects and their strategies, what a registry
//! holds, its errors, and one client over a Confluent-compatible registry
//! ([`super::confluent`]) or AWS Glue's ([`super::glue`]).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::confluent::ConfluentClient;
use super::glue::GlueClient;
use super::protobuf::ProtoFile;

/// Which registry a connection names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistryKind {
    /// A Confluent-compatible REST registry (Confluent, Redpanda, Apicurio's
    /// compatibility API, Karapace, weir's embedded one).
    #[default]
    Confluent,
    /// An AWS Glue Schema Registry.
    Glue,
}

/// Where a connection's schema registry is, and how to sign in to it.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistry {
    #[serde(default)]
    pub kind: RegistryKind,
    /// Confluent: `http(s)://host:port[/path]`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// Confluent: basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// PEM of the CA that signed the registry's certificate (system roots otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// Glue: the AWS region (`eu-west-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Glue: the registry's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_name: Option<String>,
    /// Glue: another endpoint than `https://glue.<region>.amazonaws.com` (a VPC endpoint, a test double).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Glue: AWS credentials; without them, the process's `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (a server never lends its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<String>,
}

impl std::fmt::Debug for SchemaRegistry {
    // Secrets are never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaRegistry")
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("username", &self.username)
            .field("ca_pem", &self.ca_pem.is_some())
            .field("region", &self.region)
            .field("registry_name", &self.registry_name)
            .field("endpoint", &self.endpoint)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl SchemaRegistry {
    /// A Confluent-compatible registry at `url`, without credentials.
    pub fn confluent(url: impl Into<String>) -> Self {
        Self { url: url.into(), ..Self::default() }
    }

    /// Where the registry is, for messages: its URL, or for Glue its endpoint, name and region.
    pub fn location(&self) -> String {
        match self.kind {
            RegistryKind::Confluent => self.url.trim_end_matches('/').to_string(),
            RegistryKind::Glue => format!(
                "{} (AWS Glue registry {} in {})",
                self.glue_endpoint(),
                self.registry_name.as_deref().unwrap_or("?"),
                self.region.as_deref().unwrap_or("?")
            ),
        }
    }

    /// Glue: the endpoint given, or the region's.
    pub fn glue_endpoint(&self) -> String {
        match &self.endpoint {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => format!("https://glue.{}.amazonaws.com", self.region.as_deref().unwrap_or("?")),
        }
    }

    /// What may be shown of it: everything but the secrets.
    pub fn redacted(&self) -> serde_json::Value {
        let secret = |s: &Option<String>| s.as_ref().map(|_| "(secret)");
        match self.kind {
            RegistryKind::Confluent => serde_json::json!({
                "kind": "confluent",
                "url": self.url,
                "username": self.username,
                "password": secret(&self.password),
                "ca_pem": self.ca_pem.as_ref().map(|_| "(given)"),
            }),
            RegistryKind::Glue => serde_json::json!({
                "kind": "glue",
                "region": self.region,
                "registry_name": self.registry_name,
                "endpoint": self.endpoint,
                "access_key_id": self.access_key_id,
                "secret_access_key": secret(&self.secret_access_key),
                "session_token": secret(&self.session_token),
                "ca_pem": self.ca_pem.as_ref().map(|_| "(given)"),
            }),
        }
    }

    /// Whether the settings name a registry of their kind, and nothing of another's.
    pub fn check(&self) -> Result<(), String> {
        let given = |fields: &[(&str, bool)]| -> Vec<String> {
            fields.iter().filter(|(_, set)| *set).map(|(name, _)| format!("`{name}`")).collect()
        };
        let (missing, foreign) = match self.kind {
            RegistryKind::Confluent => (
                given(&[("url", self.url.is_empty())]),
                given(&[
                    ("region", self.region.is_some()),
                    ("registry_name", self.registry_name.is_some()),
                    ("endpoint", self.endpoint.is_some()),
                    ("access_key_id", self.access_key_id.is_some()),
                    ("secret_access_key", self.secret_access_key.is_some()),
                    ("session_token", self.session_token.is_some()),
                ]),
            ),
            RegistryKind::Glue => (
                given(&[("region", self.region.is_none()), ("registry_name", self.registry_name.is_none())]),
                given(&[
                    ("url", !self.url.is_empty()),
                    ("username", self.username.is_some()),
                    ("password", self.password.is_some()),
                ]),
            ),
        };
        let kind = match self.kind {
            RegistryKind::Confluent => "a Confluent-compatible registry (kind = \"confluent\")",
            RegistryKind::Glue => "an AWS Glue registry (kind = \"glue\")",
        };
        if !missing.is_empty() {
            return Err(format!("{kind} needs {}", missing.join(" and ")));
        }
        if !foreign.is_empty() {
            return Err(format!(
                "{} belong to another kind of registry than {kind}: remove them, or set `kind`",
                foreign.join(", ")
            ));
        }
        if self.kind == RegistryKind::Glue && self.access_key_id.is_some() != self.secret_access_key.is_some() {
            return Err("an AWS Glue registry's credentials need both `access_key_id` and `secret_access_key`".into());
        }
        let url = match self.kind {
            RegistryKind::Confluent => Some(&self.url),
            RegistryKind::Glue => self.endpoint.as_ref(),
        };
        if let Some(url) = url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!("the schema registry URL {url:?} must start with http:// or https://"));
        }
        Ok(())
    }
}

/// Which writer schema framed a message: a Confluent registry's schema id,
/// or a Glue schema version's UUID. Shown as the words messages use
/// (`schema id 42`, `schema version 0f8e…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SchemaId {
    Confluent(u32),
    Glue(u128),
}

impl Serialize for SchemaId {
    // A number, or the UUID's text.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Confluent(id) => serializer.serialize_u32(*id),
            Self::Glue(uuid) => serializer.serialize_str(&uuid_text(*uuid)),
        }
    }
}

impl std::fmt::Display for SchemaId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Confluent(id) => write!(f, "schema id {id}"),
            Self::Glue(uuid) => write!(f, "schema version {}", uuid_text(*uuid)),
        }
    }
}

/// A UUID as text: `8-4-4-4-12` lowercase hex digits.
pub fn uuid_text(uuid: u128) -> String {
    let hex = format!("{uuid:032x}");
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// A UUID's text read back.
pub fn parse_uuid(text: &str) -> Option<u128> {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    (hex.len() == 32).then(|| u128::from_str_radix(&hex, 16).ok()).flatten()
}

/// The subject a topic's values are registered under (TopicNameStrategy).
pub fn value_subject(topic: &str) -> String {
    format!("{topic}-value")
}

/// The subject a topic's keys are registered under (TopicNameStrategy).
pub fn key_subject(topic: &str) -> String {
    format!("{topic}-key")
}

/// How producers name the subject a schema is registered under, as
/// Confluent's serializers do (`subject.name.strategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum SubjectStrategy {
    /// `<topic>-value` (`<topic>-key`): one record type a topic.
    #[default]
    TopicNameStrategy,
    /// The record's full name: a record type registered once, on any topic.
    RecordNameStrategy,
    /// `<topic>-<record full name>`: several record types a topic.
    TopicRecordNameStrategy,
}

impl SubjectStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TopicNameStrategy => "TopicNameStrategy",
            Self::RecordNameStrategy => "RecordNameStrategy",
            Self::TopicRecordNameStrategy => "TopicRecordNameStrategy",
        }
    }

    /// Whether the subject names the record, so that one topic may carry
    /// other records: a message must then carry the declared one.
    pub fn names_records(self) -> bool {
        self != Self::TopicNameStrategy
    }

    /// The subject of `topic`'s keys (`key`) or values whose record is `record`.
    pub fn subject(self, topic: &str, record: &str, key: bool) -> String {
        match self {
            Self::TopicNameStrategy if key => key_subject(topic),
            Self::TopicNameStrategy => value_subject(topic),
            Self::RecordNameStrategy => record.to_string(),
            Self::TopicRecordNameStrategy => format!("{topic}-{record}"),
        }
    }
}

/// A framed value, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framed<'a> {
    pub schema_id: SchemaId,
    /// Protobuf only: where the message is in the writer's file. Confluent: the
    /// path through nested messages (`[0]`: the first top-level message); Glue:
    /// one index into the file's messages sorted by full name.
    pub message_indexes: Vec<i32>,
    /// The encoded body (decompressed, where the frame says it is compressed).
    pub body: Cow<'a, [u8]>,
}

/// Splits a value framed for a registry of `kind`; `protobuf` reads the
/// message index too. The error says why the value is not one (a dead letter's reason).
pub fn unframe(kind: RegistryKind, value: &[u8], protobuf: bool) -> Result<Framed<'_>, String> {
    match kind {
        RegistryKind::Confluent => super::confluent::unframe(value, protobuf),
        RegistryKind::Glue => super::glue::unframe(value, protobuf),
    }
}

/// The writer schema a value framed for a registry of `kind` names, if it is framed.
pub fn schema_id(kind: RegistryKind, value: &[u8]) -> Option<SchemaId> {
    match (kind, value) {
        (RegistryKind::Confluent, [0, a, b, c, d, ..]) => {
            Some(SchemaId::Confluent(u32::from_be_bytes([*a, *b, *c, *d])))
        }
        (RegistryKind::Glue, _) => super::glue::schema_version(value).map(SchemaId::Glue),
        _ => None,
    }
}

/// What a schema is written in, as the registry names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    /// The registry's default: a schema without `schemaType` is Avro.
    #[default]
    Avro,
    Protobuf,
    Json,
}

impl SchemaType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Protobuf => "PROTOBUF",
            Self::Json => "JSON",
        }
    }
}

/// Another subject's schema that a schema imports (Protobuf `import`s).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Reference {
    /// The name it is imported by (`other.proto`).
    pub name: String,
    pub subject: String,
    pub version: i64,
}

/// A schema as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RegisteredSchema {
    #[serde(default, rename = "schemaType")]
    pub schema_type: SchemaType,
    pub schema: String,
    #[serde(default)]
    pub references: Vec<Reference>,
}

/// One version of a subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectVersion {
    pub subject: String,
    pub version: i64,
    pub id: SchemaId,
    pub schema: RegisteredSchema,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No answer: the registry is down, unreachable or too slow. Transient.
    #[error("the schema registry at {url} cannot be reached: {detail}")]
    Unreachable { url: String, detail: String },
    /// The registry answered with an error; `code` is its `error_code` (40401: no such subject, …).
    #[error("the schema registry at {url} answered {status}{}: {message}", code.map(|c| format!(" (error code {c})")).unwrap_or_default())]
    Refused { url: String, status: u16, code: Option<i64>, message: String },
    /// AWS answered with an error of type `kind` (AccessDeniedException, ThrottlingException, …).
    #[error("the schema registry at {url} answered {status} {kind}: {message}")]
    Aws { url: String, status: u16, kind: String, message: String },
    /// The registry said the schema, version or subject does not exist (Glue's EntityNotFoundException).
    #[error("the schema registry at {url} has no such schema: {message}")]
    NotFound { url: String, message: String },
    #[error("the schema registry at {url} answered something that is not a registry's answer: {detail}")]
    Garbled { url: String, detail: String },
    #[error("the schema registry settings are not usable: {0}")]
    Config(String),
}

impl RegistryError {
    /// Whether waiting and asking again may help (an outage, an overloaded or
    /// misconfigured-for-now registry) rather than the answer being final.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::Garbled { .. } => true,
            // Not found and bad input are answers; authentication and server errors are the operator's to fix, so wait.
            Self::Refused { status, .. } => *status != 404 && *status != 422,
            // AWS: a request it says is malformed is an answer; denied access and throttling are waited out.
            Self::Aws { kind, .. } => !matches!(kind.as_str(), "InvalidInputException" | "ValidationException"),
            Self::NotFound { .. } | Self::Config(_) => false,
        }
    }

    /// The registry said this subject, version or schema does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Refused { status: 404, .. } | Self::NotFound { .. })
    }
}

/// A blocking client of a connection's registry, whichever kind (call it off the async reactor).
#[derive(Debug, Clone)]
pub enum RegistryClient {
    Confluent(ConfluentClient),
    Glue(GlueClient),
}

impl RegistryClient {
    pub fn new(settings: &SchemaRegistry) -> Result<Self, RegistryError> {
        settings.check().map_err(RegistryError::Config)?;
        Ok(match settings.kind {
            RegistryKind::Confluent => Self::Confluent(ConfluentClient::new(settings)?),
            RegistryKind::Glue => Self::Glue(GlueClient::new(settings)?),
        })
    }

    pub fn kind(&self) -> RegistryKind {
        match self {
            Self::Confluent(_) => RegistryKind::Confluent,
            Self::Glue(_) => RegistryKind::Glue,
        }
    }

    /// Where the registry is, for messages.
    pub fn url(&self) -> &str {
        match self {
            Self::Confluent(c) => c.url(),
            Self::Glue(g) => g.url(),
        }
    }

    /// The writer schema `id` names.
    pub fn schema(&self, id: SchemaId, schema_type: SchemaType) -> Result<RegisteredSchema, RegistryError> {
        match (self, id) {
            (Self::Confluent(c), SchemaId::Confluent(id)) => c.schema(id, schema_type),
            (Self::Glue(g), SchemaId::Glue(uuid)) => g.schema_version(uuid).map(|v| v.schema),
            (_, id) => Err(RegistryError::Config(format!("{id} is not an id of {}", self.url()))),
        }
    }

    /// `version` (a number, or `latest`) of `subject` (a Glue schema's name).
    pub fn version(
        &self,
        subject: &str,
        version: &str,
        schema_type: SchemaType,
    ) -> Result<SubjectVersion, RegistryError> {
        match self {
            Self::Confluent(c) => c.version(subject, version, schema_type),
            Self::Glue(g) => g.version(subject, version),
        }
    }
}

/// The name a registered Protobuf schema's own file is compiled under.
pub const PROTO_MAIN: &str = "registered.proto";

/// A registered Protobuf schema's files for the compiler: its own (as
/// [`PROTO_MAIN`]) and every file its `references` import, and theirs, by the
/// names they are imported as, each got with `fetch` (a subject's version).
/// The well-known `google/protobuf/*` files are the compiler's own.
pub fn proto_files<E>(
    schema: &str,
    references: &[Reference],
    fetch: &mut dyn FnMut(&Reference) -> Result<RegisteredSchema, E>,
) -> Result<HashMap<String, ProtoFile>, E> {
    fn add<E>(
        references: &[Reference],
        files: &mut HashMap<String, ProtoFile>,
        fetch: &mut dyn FnMut(&Reference) -> Result<RegisteredSchema, E>,
    ) -> Result<(), E> {
        for reference in references {
            // A name met before is not fetched again, which also ends a cycle.
            if files.contains_key(&reference.name) || reference.name.starts_with("google/protobuf/") {
                continue;
            }
            let referenced = fetch(reference)?;
            files.insert(reference.name.clone(), ProtoFile::registered(&referenced.schema));
            add(&referenced.references, files, fetch)?;
        }
        Ok(())
    }
    let mut files = HashMap::from([(PROTO_MAIN.to_string(), ProtoFile::registered(schema))]);
    add(references, &mut files, fetch)?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_are_told_apart_from_answers() {
        let refused = |status| RegistryError::Refused { url: "u".into(), status, code: None, message: "m".into() };
        assert!(RegistryError::Unreachable { url: "u".into(), detail: "refused".into() }.is_transient());
        assert!(refused(503).is_transient() && refused(401).is_transient());
        assert!(!refused(404).is_transient() && refused(404).is_not_found());
    }
}
