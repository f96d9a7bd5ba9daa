//! The stream publisher declaration, a TOML file that mirrors the decorator
//! users know:
//!
//! ```toml
//! name = "read_clicks"
//! flush_interval_mins = 5
//! output_tables = ["clicks"]
//! [source.kafka]
//! topic = "clicks"
//! data_format = "json"                # or "avro", or "protobuf" with message = "pkg.Click"
//! schema = "clicks.json"            # a path (relative to this file), or the schema inline
//! dead_letter_topic = "clicks.dlq"  # optional
//! key_format = "string"             # or "bytes" (the default), or "json"/"avro"/"protobuf" with key_schema
//! include_headers = true            # the `_headers` column (the default)
//! [source.kafka.src_cfg]
//! "kafka.time_rollover_seconds" = 30
//! ```
//!
//! A table may be partitioned (`tables::partition`), outermost first:
//! `partition_by = ["country", "day(_timestamp)"]`, with at most
//! `max_partitions_per_batch` partition values a batch (100 unless set);
//! `table_format = "iceberg"` writes Iceberg metadata beside its Delta log
//! (`tables::iceberg`).
//!
//! Parsed in two stages: the words (unknown keys are errors), then resolved
//! into a [`KafkaSource`] with every value checked.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::formats::KeyFormat;
use crate::formats::registry::SubjectStrategy;
use crate::publisher::source::{self, DataFormat, KafkaSource, SourceConfig};
use crate::tables::TableFormat;
use crate::tables::partition::{DEFAULT_MAX_PARTITIONS, MAX_PARTITIONS_LIMIT, PartitionSpec, Partitioning};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    pub name: String,
    pub flush_interval_mins: toml::Value,
    pub output_tables: Option<Vec<String>>,
    pub source: SourceSection,
    /// The output table's partitioning: columns, or transforms of them.
    #[serde(default)]
    pub partition_by: Vec<String>,
    pub max_partitions_per_batch: Option<toml::Value>,
    /// `"delta"` (the default) or `"iceberg"`.
    pub table_format: Option<String>,
    /// Only here to say why it is wrong.
    trigger: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSection {
    pub kafka: Option<KafkaSection>,
    pub postgres_cdc: Option<super::change_log::PostgresCdcSection>,
}

/// A declaration resolved, by the kind of its source.
#[derive(Debug, Clone)]
pub enum Resolution {
    /// A Kafka topic's messages.
    Stream(Resolved),
    /// A database's change log.
    ChangeLog(super::change_log::Resolved),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSection {
    pub topic: String,
    pub data_format: DataFormat,
    pub schema: Option<String>,
    /// `data_format = "protobuf"`: the message each value holds (`pkg.Click`).
    pub message: Option<String>,
    pub dead_letter_topic: Option<String>,
    /// How keys are encoded: `bytes` (the default), `string`, or a format read with `key_schema`.
    pub key_format: Option<KeyFormatName>,
    pub key_schema: Option<String>,
    /// `key_format = "protobuf"`: the message each key holds.
    pub key_message: Option<String>,
    /// Whether rows carry the headers (`_headers`); true unless set false.
    pub include_headers: Option<bool>,
    /// How producers name the registry subjects of this topic's schemas.
    pub subject_name_strategy: Option<SubjectStrategy>,
    #[serde(default)]
    pub src_cfg: BTreeMap<String, toml::Value>,
}

/// The words `key_format` takes.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KeyFormatName {
    Bytes,
    String,
    Json,
    Avro,
    Protobuf,
}

#[derive(Debug, thiserror::Error)]
pub enum DeclarationError {
    #[error("{0}")]
    Toml(String),
    #[error("publisher name {0:?} is invalid: use letters, digits and `_`, starting with a letter")]
    BadName(String),
    #[error(
        "a stream publisher takes no trigger: the rollover is its trigger. Remove `trigger`, and set when batches close with `flush_interval_mins` and `[source.kafka.src_cfg]`"
    )]
    Trigger,
    #[error(
        "`schema` is required: point it at the schema's file (a JSON Schema, an Avro schema or a .proto, e.g. schema = \"clicks.json\") or give the schema inline"
    )]
    MissingSchema,
    #[error("output_tables must be exactly [\"{expected}\"], the table named after the topic, not {given:?}")]
    OutputTables { expected: String, given: Vec<String> },
    #[error("a publisher has one source: `[source.kafka]` or `[source.postgres_cdc]`")]
    OneSource,
    #[error(
        "a postgres_cdc publisher runs with `weir stream` for now: a server does not yet take one. Run it with `weir stream DECLARATION --plugin P --connection-file C`"
    )]
    ChangeLogNotServed,
    #[error(
        "key_format = {0:?} needs `key_schema`: the schema of the keys (a file relative to the declaration, or inline)"
    )]
    MissingKeySchema(&'static str),
    #[error("`{0}` is only for a key_format read with a schema (json, avro or protobuf), not key_format = {1:?}")]
    KeySchemaUnused(&'static str, &'static str),
    #[error("the key schema {0}")]
    KeySchema(String),
    #[error(
        "subject_name_strategy = {0:?} names subjects after the record, and the declared JSON Schema has no `title`: give it the title its producers' schema has"
    )]
    NoRecordName(&'static str),
    #[error("{0}")]
    Partition(String),
    #[error("{0}")]
    TableFormat(String),
    #[error(transparent)]
    Source(#[from] source::SourceError),
}

/// A declaration, checked and resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub name: String,
    pub flush_interval_mins: u64,
    pub source: KafkaSource,
    pub partitioning: Partitioning,
    /// `None`: the collection's default ([`crate::catalog::Collection::table_format_of`]).
    pub table_format: Option<TableFormat>,
}

impl Declaration {
    pub fn parse(text: &str) -> Result<Self, DeclarationError> {
        toml::from_str(text).map_err(|e| DeclarationError::Toml(e.message().to_string()))
    }

    /// What every publisher's declaration must get right: no trigger, a valid name.
    fn basics(&self) -> Result<(), DeclarationError> {
        if self.trigger.is_some() {
            return Err(DeclarationError::Trigger);
        }
        if !valid_name(&self.name) {
            return Err(DeclarationError::BadName(self.name.clone()));
        }
        Ok(())
    }

    /// Checks every value of a declaration of either kind of source.
    pub fn resolve_any(mut self, base_dir: Option<&Path>) -> Result<Resolution, DeclarationError> {
        self.basics()?;
        match (self.source.kafka.is_some(), self.source.postgres_cdc.take()) {
            (false, Some(cdc)) => Ok(Resolution::ChangeLog(super::change_log::resolve(self, cdc)?)),
            (true, None) => Ok(Resolution::Stream(self.resolve(base_dir)?)),
            _ => Err(DeclarationError::OneSource),
        }
    }

    /// Checks every value of a declaration whose source is Kafka; `base_dir`
    /// resolves a schema given as a relative path (`None`: the schema must be inline).
    pub fn resolve(self, base_dir: Option<&Path>) -> Result<Resolved, DeclarationError> {
        self.basics()?;
        let flush = serde_json::to_value(&self.flush_interval_mins).unwrap_or_default();
        let flush_interval_mins = source::flush_interval(&flush)?;
        let kafka = match (self.source.kafka, self.source.postgres_cdc) {
            (Some(kafka), None) => kafka,
            (None, Some(_)) => return Err(DeclarationError::ChangeLogNotServed),
            _ => return Err(DeclarationError::OneSource),
        };
        let expected = table_name_for_topic(&kafka.topic);
        let given = self.output_tables.unwrap_or_default();
        if given != [expected.clone()] {
            return Err(DeclarationError::OutputTables { expected, given });
        }
        let schema_spec = kafka.schema.clone().ok_or(DeclarationError::MissingSchema)?;
        let format = source::load_format(kafka.data_format, &schema_spec, kafka.message.as_deref(), base_dir)?;
        let src_cfg =
            kafka.src_cfg.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default())).collect();
        let config = SourceConfig::parse(&src_cfg)?;
        let key = key_format(&kafka, base_dir)?;
        let subjects = kafka.subject_name_strategy.unwrap_or_default();
        let untitled = |f: &crate::formats::Format| subjects.names_records() && f.record_name().is_none();
        if untitled(&format) || matches!(&key, KeyFormat::Decoded(k) if untitled(k)) {
            return Err(DeclarationError::NoRecordName(subjects.as_str()));
        }
        let partition_by = PartitionSpec::parse(&self.partition_by).map_err(DeclarationError::Partition)?;
        let max_partitions_per_batch = max_partitions(self.max_partitions_per_batch.as_ref(), &partition_by)?;
        let table_format =
            self.table_format.as_deref().map(TableFormat::parse).transpose().map_err(DeclarationError::TableFormat)?;
        let kafka_topic = kafka.topic;
        Ok(Resolved {
            name: self.name,
            flush_interval_mins,
            partitioning: Partitioning { spec: partition_by, max_per_batch: max_partitions_per_batch },
            table_format,
            source: KafkaSource {
                dead_letter_topic: kafka.dead_letter_topic,
                key,
                headers: kafka.include_headers.unwrap_or(true),
                subjects,
                ..KafkaSource::new(kafka_topic, format, config)
            },
        })
    }
}

/// `max_partitions_per_batch`: a whole number up to [`MAX_PARTITIONS_LIMIT`], for a partitioned table.
fn max_partitions(given: Option<&toml::Value>, spec: &PartitionSpec) -> Result<usize, DeclarationError> {
    let Some(given) = given else { return Ok(DEFAULT_MAX_PARTITIONS) };
    if spec.is_empty() {
        return Err(DeclarationError::Partition(
            "max_partitions_per_batch is for a partitioned table: set partition_by too, or remove it".into(),
        ));
    }
    match given.as_integer() {
        Some(n) if (1..=MAX_PARTITIONS_LIMIT as i64).contains(&n) => Ok(n as usize),
        _ => Err(DeclarationError::Partition(format!(
            "max_partitions_per_batch must be a whole number from 1 to {MAX_PARTITIONS_LIMIT}, not {given}"
        ))),
    }
}

/// The declared key format, its schema read and parsed.
fn key_format(kafka: &KafkaSection, base_dir: Option<&Path>) -> Result<KeyFormat, DeclarationError> {
    let decoded = |format: DataFormat| -> Result<KeyFormat, DeclarationError> {
        let spec = kafka.key_schema.as_deref().ok_or(DeclarationError::MissingKeySchema(format.as_str()))?;
        let parsed =
            source::load_format(format, spec, kafka.key_message.as_deref(), base_dir).map_err(|e| match e {
                source::SourceError::Schema(reason) => DeclarationError::KeySchema(
                    reason
                        .replace("`message`", "`key_message`")
                        .replace("each value holds (message", "each key holds (key_message"),
                ),
                other => other.into(),
            })?;
        Ok(KeyFormat::Decoded(parsed))
    };
    let plain = |key_format: KeyFormat, name: &'static str| match [
        ("key_schema", &kafka.key_schema),
        ("key_message", &kafka.key_message),
    ]
    .iter()
    .find(|(_, v)| v.is_some())
    {
        Some((key, _)) => Err(DeclarationError::KeySchemaUnused(key, name)),
        None => Ok(key_format),
    };
    match kafka.key_format.unwrap_or(KeyFormatName::Bytes) {
        KeyFormatName::Bytes => plain(KeyFormat::Bytes, "bytes"),
        KeyFormatName::String => plain(KeyFormat::String, "string"),
        KeyFormatName::Json => decoded(DataFormat::Json),
        KeyFormatName::Avro => decoded(DataFormat::Avro),
        KeyFormatName::Protobuf => decoded(DataFormat::Protobuf),
    }
}

/// A publisher's or a table's name: a letter, then letters, digits and `_`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A topic's table name: the topic, lowercased, with characters a table name cannot hold replaced by `_`.
pub fn table_name_for_topic(topic: &str) -> String {
    topic
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c.to_ascii_lowercase() } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"schema = '{"type":"object","properties":{"id":{"type":"integer"}}}'"#;

    fn resolve(text: &str) -> Result<Resolved, DeclarationError> {
        Declaration::parse(text)?.resolve(Some(Path::new(".")))
    }

    fn declaration(top: &str, kafka: &str) -> String {
        format!("name = \"read_clicks\"\n{top}\n[source.kafka]\ntopic = \"clicks\"\ndata_format = \"json\"\n{kafka}\n")
    }

    #[test]
    fn the_seed_declaration_resolves() {
        let text = declaration(
            "flush_interval_mins = 5\noutput_tables = [\"clicks\"]",
            &format!(
                "{SCHEMA}\ndead_letter_topic = \"clicks.dlq\"\n[source.kafka.src_cfg]\n\"kafka.time_rollover_seconds\" = 30"
            ),
        );
        let r = resolve(&text).unwrap();
        assert_eq!((r.name.as_str(), r.flush_interval_mins), ("read_clicks", 5));
        assert_eq!(r.source.config.rollover(5).time.as_secs(), 30);
        assert_eq!(r.source.dead_letter_topic.as_deref(), Some("clicks.dlq"));
        assert!(r.partitioning.spec.is_empty());
        assert_eq!(r.table_format, None, "the collection's default");

        let text = declaration(
            "flush_interval_mins = 5\noutput_tables = [\"clicks\"]\npartition_by = [\"country\", \"day(_timestamp)\"]\ntable_format = \"iceberg\"",
            SCHEMA,
        );
        let r = resolve(&text).unwrap();
        assert_eq!(r.table_format, Some(TableFormat::Iceberg));
        assert_eq!(
            (r.partitioning.spec.columns(), r.partitioning.max_per_batch),
            (vec!["country".into(), "_timestamp_day".into()], 100)
        );
    }

    #[test]
    fn each_mistake_says_what_to_do() {
        let ok_top = "flush_interval_mins = 5\noutput_tables = [\"clicks\"]";
        let cases = [
            (
                declaration(&format!("{ok_top}\ntrigger = \"0 * * * *\""), SCHEMA),
                "a stream publisher takes no trigger: the rollover is its trigger.",
            ),
            (declaration(ok_top, ""), "`schema` is required"),
            (
                declaration(&format!("{ok_top}\ntable_format = \"hudi\""), SCHEMA),
                "table_format must be \"delta\" or \"iceberg\", not \"hudi\"",
            ),
            (
                declaration(ok_top, "schema = '{\"type\": 1}'"),
                "the schema does not parse: the schema must be a JSON object",
            ),
            (
                declaration("flush_interval_mins = 0\noutput_tables = [\"clicks\"]", SCHEMA),
                "flush_interval_mins must be a whole number of minutes, at least 1, not 0",
            ),
            (
                declaration("flush_interval_mins = 1.5\noutput_tables = [\"clicks\"]", SCHEMA),
                "flush_interval_mins must be a whole number of minutes, at least 1, not 1.5",
            ),
            (
                declaration("flush_interval_mins = 5\noutput_tables = [\"events\"]", SCHEMA),
                "output_tables must be exactly [\"clicks\"]",
            ),
            (
                declaration(ok_top, &format!("{SCHEMA}\n[source.kafka.src_cfg]\n\"kafka.messages_rollover\" = -1")),
                "src_cfg `kafka.messages_rollover` must be a whole number greater than zero, not -1",
            ),
            (declaration(ok_top, &format!("{SCHEMA}\ncolour = \"blue\"")), "unknown field `colour`"),
            (
                declaration(ok_top, &format!("{SCHEMA}\nkey_format = \"avro\"")),
                "key_format = \"avro\" needs `key_schema`",
            ),
            (
                declaration(ok_top, &format!("{SCHEMA}\nkey_format = \"string\"\nkey_schema = \"k.json\"")),
                "`key_schema` is only for a key_format read with a schema",
            ),
            (
                declaration(
                    ok_top,
                    &format!(
                        "{SCHEMA}\nkey_format = \"protobuf\"\nkey_schema = 'syntax = \"proto3\"; message K {{ string id = 1; }}'"
                    ),
                ),
                "the key schema needs `key_message`",
            ),
            (declaration(ok_top, SCHEMA).replace("\"json\"", "\"xml\""), "unknown variant `xml`"),
            (
                declaration(&format!("{ok_top}\npartition_by = [\"week(_timestamp)\"]"), SCHEMA),
                "partition_by entry \"week(_timestamp)\": no transform `week`",
            ),
            (
                declaration(&format!("{ok_top}\nmax_partitions_per_batch = 10"), SCHEMA),
                "max_partitions_per_batch is for a partitioned table",
            ),
            (
                declaration(&format!("{ok_top}\npartition_by = [\"id\"]\nmax_partitions_per_batch = 0"), SCHEMA),
                "max_partitions_per_batch must be a whole number from 1 to 10000, not 0",
            ),
        ];
        for (text, expected) in cases {
            let err = resolve(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}\n→ {err}\nexpected: {expected}");
        }
    }
}
