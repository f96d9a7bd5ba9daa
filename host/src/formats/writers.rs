//! The writer schemas of a registry-framed topic: each schema id a message
//! names is fetched from the registry once, checked against the declared
//! schema, and kept. A schema that cannot be resolved to the declared one
//! makes its messages dead letters that say why; a registry that cannot be
//! reached is waited for, because that is an outage, not a bad message.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use prost_reflect::DescriptorPool;

use super::registry::{
    PROTO_MAIN, RegisteredSchema, RegistryClient, RegistryError, RegistryKind, SchemaId, SchemaType, SubjectStrategy,
    proto_files,
};
use super::{Format, avro_schema, json_schema, protobuf};

/// What one writer schema means for the messages it framed.
#[derive(Debug)]
pub enum Writer {
    /// JSON: the body is read with the declared schema (the writer's agrees with it).
    Json,
    /// Avro: bodies are datums of this schema (its JSON text), resolved to the declared one.
    Avro(Arc<str>),
    /// Protobuf: bodies are read by field number with the declared message,
    /// once the message a frame's index path names is found compatible.
    Protobuf(ProtobufWriter),
    /// Messages of this schema are dead letters, for this reason.
    Refused(String),
}

/// A Protobuf writer schema's file, and what each message-index path in it was found to be.
pub struct ProtobufWriter {
    id: SchemaId,
    pool: DescriptorPool,
    file: String,
    declared: prost_reflect::MessageDescriptor,
    checked: Mutex<HashMap<Vec<i32>, Result<(), String>>>,
}

impl std::fmt::Debug for ProtobufWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtobufWriter").field("id", &self.id).field("file", &self.file).finish_non_exhaustive()
    }
}

impl ProtobufWriter {
    /// Whether the message at `indexes` in the writer's file can be read as the declared message.
    pub fn check(&self, indexes: &[i32]) -> Result<(), String> {
        let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        checked
            .entry(indexes.to_vec())
            .or_insert_with(|| {
                let found = match self.id {
                    SchemaId::Confluent(_) => protobuf::message_at(&self.pool, &self.file, indexes),
                    SchemaId::Glue(_) => protobuf::message_by_glue_index(&self.pool, &self.file, indexes[0]),
                };
                let Some(message) = found else {
                    return Err(format!("the message-index path {indexes:?} names no message in {}", self.id));
                };
                if message.name() != self.declared.name() {
                    return Err(format!(
                        "the value is a {} ({}, message path {indexes:?}), not the declared {}",
                        message.full_name(),
                        self.id,
                        self.declared.full_name()
                    ));
                }
                protobuf::check_compatible(&message, &self.declared)
                    .map_err(|e| format!("{} cannot be read as the declared schema: {e}", self.id))
            })
            .clone()
    }
}

/// What a worker's writer schemas tell whoever watches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryEvent {
    /// The registry could not be reached (or refused for now); messages wait.
    Waiting { error: String },
    /// It answered again after an outage.
    Reachable,
    /// A writer schema was fetched: `usable` false when its messages become dead letters.
    Schema { id: SchemaId, usable: bool },
}

/// Who hears of [`RegistryEvent`]s.
pub type Observer = Arc<dyn Fn(RegistryEvent) + Send + Sync>;

/// The writer schemas of one topic, shared by a worker's decoders.
#[derive(Clone)]
pub struct WriterSchemas {
    inner: Arc<Shared>,
}

struct Shared {
    client: RegistryClient,
    format: Format,
    subject: String,
    known: RwLock<BTreeMap<SchemaId, Arc<Writer>>>,
    /// Serialises fetches, so a burst of runs naming a new id fetches it once.
    fetching: tokio::sync::Mutex<()>,
    observer: Option<Observer>,
    backoff: (Duration, Duration),
    /// A subject strategy that names records: a writer schema of another
    /// record than the declared one is refused.
    by_record: Option<SubjectStrategy>,
}

impl std::fmt::Debug for WriterSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterSchemas")
            .field("registry", &self.inner.client)
            .field("subject", &self.inner.subject)
            .finish_non_exhaustive()
    }
}

impl WriterSchemas {
    /// The writer schemas of `subject`'s messages, read as `format`.
    pub fn new(client: RegistryClient, format: Format, subject: String, observer: Option<Observer>) -> Self {
        Self::with_backoff(client, format, subject, observer, (Duration::from_millis(500), Duration::from_secs(15)))
    }

    /// With the first and the longest wait between tries while the registry is away.
    pub fn with_backoff(
        client: RegistryClient,
        format: Format,
        subject: String,
        observer: Option<Observer>,
        backoff: (Duration, Duration),
    ) -> Self {
        Self {
            inner: Arc::new(Shared {
                client,
                format,
                subject,
                known: RwLock::default(),
                fetching: tokio::sync::Mutex::new(()),
                observer,
                backoff,
                by_record: None,
            }),
        }
    }

    /// Under `strategy`, when it names records, messages of another record
    /// than the declared one are dead letters that name the record they carried.
    pub fn by_record(mut self, strategy: SubjectStrategy) -> Self {
        let shared = Arc::get_mut(&mut self.inner).expect("set before the writer schemas are shared");
        shared.by_record = strategy.names_records().then_some(strategy);
        self
    }

    pub fn subject(&self) -> &str {
        &self.inner.subject
    }

    pub fn registry_url(&self) -> &str {
        self.inner.client.url()
    }

    /// Which registry's framing the messages carry.
    pub fn kind(&self) -> RegistryKind {
        self.inner.client.kind()
    }

    /// The writer schema a framed value names, if it is framed.
    pub fn schema_id(&self, value: &[u8]) -> Option<SchemaId> {
        super::registry::schema_id(self.kind(), value)
    }

    /// The writer schema `id`, if it has been fetched.
    pub fn get(&self, id: SchemaId) -> Option<Arc<Writer>> {
        self.inner.known.read().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
    }

    /// The ids fetched so far.
    pub fn ids(&self) -> Vec<SchemaId> {
        self.inner.known.read().unwrap_or_else(|e| e.into_inner()).keys().copied().collect()
    }

    fn emit(&self, event: RegistryEvent) {
        if let Some(observer) = &self.inner.observer {
            observer(event);
        }
    }

    /// Makes sure every id in `ids` is known: fetches the new ones, waiting and
    /// asking again for as long as the registry cannot be reached.
    pub async fn prepare(&self, ids: impl Iterator<Item = SchemaId>) {
        let mut wanted: Vec<SchemaId> = ids.filter(|id| self.get(*id).is_none()).collect();
        if wanted.is_empty() {
            return;
        }
        wanted.sort_unstable();
        wanted.dedup();
        let _one_at_a_time = self.inner.fetching.lock().await;
        for id in wanted {
            if self.get(id).is_some() {
                continue;
            }
            let mut wait = self.inner.backoff.0;
            let mut waiting = false;
            let writer = loop {
                let this = self.clone();
                let fetched =
                    tokio::task::spawn_blocking(move || this.fetch(id)).await.expect("fetching does not panic");
                match fetched {
                    Ok(writer) => break writer,
                    Err(e) if e.is_transient() => {
                        if !waiting {
                            tracing::warn!(subject = %self.inner.subject, schema_id = %id, error = %e, "waiting for the schema registry; messages are held, not dead-lettered");
                        }
                        waiting = true;
                        self.emit(RegistryEvent::Waiting { error: e.to_string() });
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(self.inner.backoff.1);
                    }
                    Err(e) if e.is_not_found() => {
                        break Writer::Refused(format!(
                            "{id} is not in the schema registry at {}",
                            self.inner.client.url()
                        ));
                    }
                    Err(e) => break Writer::Refused(format!("{id} cannot be fetched: {e}")),
                }
            };
            if waiting {
                tracing::info!(subject = %self.inner.subject, "the schema registry answers again");
                self.emit(RegistryEvent::Reachable);
            }
            let usable = !matches!(writer, Writer::Refused(_));
            if let Writer::Refused(reason) = &writer {
                tracing::warn!(subject = %self.inner.subject, schema_id = %id, %reason, "messages of this writer schema become dead letters");
            } else {
                tracing::info!(subject = %self.inner.subject, schema_id = %id, "writer schema fetched");
            }
            self.inner.known.write().unwrap_or_else(|e| e.into_inner()).insert(id, Arc::new(writer));
            self.emit(RegistryEvent::Schema { id, usable });
        }
    }

    /// Fetches schema `id` and resolves it against the declared schema (blocking).
    fn fetch(&self, id: SchemaId) -> Result<Writer, RegistryError> {
        let format = &self.inner.format;
        let expected = format.data_format().schema_type();
        let schema = self.inner.client.schema(id, expected)?;
        if schema.schema_type != expected {
            return Ok(Writer::Refused(format!(
                "{id} is a {} schema, but the publisher declares data_format = {:?}",
                schema.schema_type.as_str(),
                format.data_format().as_str()
            )));
        }
        if let (Some(strategy), Some(declared)) = (self.inner.by_record, format.record_name()) {
            let carried = match format {
                Format::Avro(_) => avro_schema::top_name(&schema.schema),
                Format::Json { .. } => json_schema::title(&schema.schema),
                // Each message's path names its message, which is checked as it is read.
                Format::Protobuf(_) => None,
            };
            if let Some(carried) = carried.filter(|c| c != declared) {
                return Ok(Writer::Refused(format!(
                    "the value carries record `{carried}` ({id}), not the declared `{declared}`: under subject_name_strategy = {:?} this publisher reads only `{declared}`",
                    strategy.as_str()
                )));
            }
        }
        Ok(match resolve(format, &schema, &self.inner.client) {
            Ok(writer) => writer,
            Err(Resolution::Registry(e)) => return Err(e),
            Err(Resolution::Incompatible(reason)) => {
                Writer::Refused(format!("{id} cannot be read as the declared schema: {reason}"))
            }
        }
        .with_id(id))
    }
}

impl Writer {
    fn with_id(self, id: SchemaId) -> Self {
        match self {
            Writer::Protobuf(mut p) => {
                p.id = id;
                Writer::Protobuf(p)
            }
            other => other,
        }
    }
}

/// Why a writer schema is not usable.
pub enum Resolution {
    /// Fetching it (or what it references) failed.
    Registry(RegistryError),
    /// It cannot be read as the declared schema, for this reason.
    Incompatible(String),
}

impl From<RegistryError> for Resolution {
    fn from(e: RegistryError) -> Self {
        Self::Registry(e)
    }
}

/// Resolves a writer schema against the declared format: the same check at
/// registration (against the subject's latest version) and while consuming.
pub fn resolve(format: &Format, schema: &RegisteredSchema, client: &RegistryClient) -> Result<Writer, Resolution> {
    match format {
        Format::Json { columns, .. } => {
            let writer = json_schema::from_json_schema(&schema.schema)
                .map_err(|e| Resolution::Incompatible(format!("the writer's JSON Schema does not parse: {e}")))?;
            json_schema::check_compatible(&writer, columns).map_err(Resolution::Incompatible)?;
            Ok(Writer::Json)
        }
        Format::Avro(declared) => {
            // Named types from other subjects' schemas are defined where first used.
            let text = match schema.references.is_empty() {
                true => schema.schema.clone(),
                false => {
                    let mut referenced = Vec::new();
                    avro_references(client, &schema.references, &mut referenced)?;
                    let texts: Vec<String> = referenced.into_iter().map(|(_, text)| text).collect();
                    super::avro_references::inline_references(&schema.schema, &texts)
                        .map_err(Resolution::Incompatible)?
                }
            };
            let writer = avro_schema::AvroSchema::parse(&text)
                .map_err(|e| Resolution::Incompatible(format!("the writer's Avro schema {e}")))?;
            declared.schema.can_read(&writer).map_err(|e| Resolution::Incompatible(e.to_string()))?;
            // arrow-avro must agree, or decoding would fail on every message.
            super::avro::decoder(&text, &declared.text, 1)
                .map_err(|e| Resolution::Incompatible(format!("weir's Avro decoder cannot resolve it: {e}")))?;
            // The declared schema itself, however it is spaced, is read without resolution (faster).
            let same = |a: &str, b: &str| {
                serde_json::from_str::<serde_json::Value>(a).ok() == serde_json::from_str::<serde_json::Value>(b).ok()
            };
            if same(&text, &declared.text) {
                return Ok(Writer::Avro(declared.text.clone()));
            }
            Ok(Writer::Avro(text.as_str().into()))
        }
        Format::Protobuf(declared) => {
            let files = proto_files(&schema.schema, &schema.references, &mut |r| {
                client.version(&r.subject, &r.version.to_string(), SchemaType::Protobuf).map(|v| v.schema)
            })?;
            let pool = protobuf::compile(PROTO_MAIN, files)
                .map_err(|e| Resolution::Incompatible(format!("the writer's .proto does not compile: {e}")))?;
            Ok(Writer::Protobuf(ProtobufWriter {
                id: SchemaId::Confluent(0),
                pool,
                file: PROTO_MAIN.to_string(),
                declared: declared.message.clone(),
                checked: Mutex::default(),
            }))
        }
    }
}

/// The Avro schemas `references` name, and those they reference, each once
/// (by subject and version), in the order met.
fn avro_references(
    client: &RegistryClient,
    references: &[super::registry::Reference],
    found: &mut Vec<((String, i64), String)>,
) -> Result<(), RegistryError> {
    for r in references {
        let at = (r.subject.clone(), r.version);
        if found.iter().any(|(seen, _)| *seen == at) {
            continue;
        }
        let referenced = client.version(&r.subject, &r.version.to_string(), SchemaType::Avro)?.schema;
        found.push((at, referenced.schema.clone()));
        avro_references(client, &referenced.references, found)?;
    }
    Ok(())
}

/// Why the declared schema failed its cross-check against the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrossCheckError {
    #[error(
        "cannot cross-check the schema: {0}. Check the connection's schema registry URL and credentials, and that the registry is up"
    )]
    Registry(RegistryError),
    #[error(
        "the schema registry at {url} has no subject `{subject}`: register the topic's schema there first (a producer's serializer does on first use), or correct the topic"
    )]
    NoSubject { url: String, subject: String },
    #[error(
        "the declared schema cannot read what the registry holds for subject `{subject}` (version {version}, {id}): {reason}"
    )]
    Incompatible { subject: String, version: i64, id: SchemaId, reason: String },
    #[error(
        "subject_name_strategy = {strategy:?} names subjects after the record, and the declared JSON Schema has no `title` to name it: give it the title its producers' schema has"
    )]
    NoRecordName { strategy: &'static str },
}

/// Cross-checks a topic's declared value schema against its value subject
/// and, when its keys are read with a schema, the key schema against its key
/// subject. Returns the versions checked against.
pub fn cross_check_topic(
    value: &Format,
    key: &super::KeyFormat,
    strategy: SubjectStrategy,
    client: &RegistryClient,
    topic: &str,
) -> Result<Vec<super::registry::SubjectVersion>, CrossCheckError> {
    let mut checked = vec![cross_check(value, client, &subject_of(strategy, value, topic, false)?)?];
    if let super::KeyFormat::Decoded(key) = key {
        checked.push(cross_check(key, client, &subject_of(strategy, key, topic, true)?)?);
    }
    Ok(checked)
}

/// The subject `strategy` registers `format`'s schemas of `topic` under.
pub fn subject_of(
    strategy: SubjectStrategy,
    format: &Format,
    topic: &str,
    key: bool,
) -> Result<String, CrossCheckError> {
    match (strategy.names_records(), format.record_name()) {
        (false, _) => Ok(strategy.subject(topic, "", key)),
        (true, Some(record)) => Ok(strategy.subject(topic, record, key)),
        (true, None) => Err(CrossCheckError::NoRecordName { strategy: strategy.as_str() }),
    }
}

/// Cross-checks the declared schema against the latest version of a
/// subject (blocking): the declared schema must be able to read what
/// the registry holds. Returns that version.
pub fn cross_check(
    format: &Format,
    client: &RegistryClient,
    subject: &str,
) -> Result<super::registry::SubjectVersion, CrossCheckError> {
    let subject = subject.to_string();
    let expected = format.data_format().schema_type();
    let latest = client.version(&subject, "latest", expected).map_err(|e| match e {
        e if e.is_not_found() => CrossCheckError::NoSubject { url: client.url().to_string(), subject: subject.clone() },
        e => CrossCheckError::Registry(e),
    })?;
    let incompatible = |reason: String| CrossCheckError::Incompatible {
        subject: subject.clone(),
        version: latest.version,
        id: latest.id,
        reason,
    };
    if latest.schema.schema_type != expected {
        return Err(incompatible(format!(
            "it is a {} schema, but the publisher declares data_format = {:?}",
            latest.schema.schema_type.as_str(),
            format.data_format().as_str()
        )));
    }
    match resolve(format, &latest.schema, client) {
        Ok(Writer::Protobuf(writer)) => {
            let Format::Protobuf(declared) = format else { unreachable!("a Protobuf writer for a Protobuf format") };
            let message = writer
                .pool
                .all_messages()
                .filter(|m| m.parent_file().name() == writer.file)
                .find(|m| m.full_name() == declared.message.full_name())
                .or_else(|| {
                    writer
                        .pool
                        .all_messages()
                        .filter(|m| m.parent_file().name() == writer.file)
                        .find(|m| m.name() == declared.message.name())
                });
            let Some(message) = message else {
                return Err(incompatible(format!("it defines no message {}", declared.message.full_name())));
            };
            protobuf::check_compatible(&message, &declared.message).map_err(incompatible)?;
            Ok(latest)
        }
        Ok(_) => Ok(latest),
        Err(Resolution::Registry(e)) => Err(CrossCheckError::Registry(e)),
        Err(Resolution::Incompatible(reason)) => Err(incompatible(reason)),
    }
}
