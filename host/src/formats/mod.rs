//! Kafka messages to Arrow rows. One module per format turns message values
//! into record batches of the declared columns: `json` (with `json_schema`
//! for its JSON Schema), `avro` (with `avro_schema`, and `avro_references` for
//! schemas that use other subjects' types), `protobuf`; `registry`
//! is the Confluent wire format and client, and `writers` the writer schemas a
//! registry serves, resolved against the declared schema. [`Decoder`]
//! (in `decoder`) is the one interface the stream worker uses: it does not learn which format it reads.
//!
//! A message that does not decode becomes a dead letter with its reason, never
//! a failed batch. Every row also carries where it came from, in these
//! columns after the declared ones:
//!
//! | column       | type                        | what                                  |
//! |--------------|-----------------------------|---------------------------------------|
//! | `_partition` | `Int32`                     | the Kafka partition                   |
//! | `_offset`    | `Int64`                     | the message's offset in the partition |
//! | `_timestamp` | `Timestamp(µs, "+00:00")`   | the message's timestamp, if it has one (Kafka's are milliseconds; Delta's unit is the microsecond) |
//! | `_key`       | `Binary`, `Utf8` or a struct | the message's key, if it has one, as `key_format` declares |
//! | `_schema_id` | `Int32`                     | registry mode: the writer schema's id |
//! | `_headers`   | `List<Struct<key: Utf8, value: Binary>>` | the headers in order, repeated keys kept (unless `include_headers = false`) |

pub mod avro;
pub mod avro_references;
pub mod avro_schema;
pub mod confluent;
mod decoder;
pub mod glue;
pub mod json;
pub mod json_schema;
mod message;
pub mod protobuf;
pub mod registry;
pub mod rfc3339;
pub mod writers;

pub use decoder::{DecodeTask, Decoded, Decoder, Key, Part};
pub use message::{DeadLetter, RawMessage};

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use registry::SchemaType;

/// How a topic's values are encoded, as declared (`data_format`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DataFormat {
    Json,
    Avro,
    Protobuf,
}

impl DataFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Avro => "avro",
            Self::Protobuf => "protobuf",
        }
    }

    /// What the registry calls schemas of this format.
    pub fn schema_type(self) -> SchemaType {
        match self {
            Self::Json => SchemaType::Json,
            Self::Avro => SchemaType::Avro,
            Self::Protobuf => SchemaType::Protobuf,
        }
    }

    /// What the declared `schema` is, for messages that ask for it.
    pub fn schema_kind(self) -> &'static str {
        match self {
            Self::Json => "a JSON Schema",
            Self::Avro => "an Avro schema (JSON)",
            Self::Protobuf => ".proto source",
        }
    }
}

/// A declared format with its schema parsed: what every row of the table holds.
#[derive(Debug, Clone)]
pub enum Format {
    Json {
        columns: SchemaRef,
        /// The schema's `title`: its record name, as Confluent's JSON Schema serializers take it.
        title: Option<Arc<str>>,
    },
    Avro(Arc<avro::Declared>),
    Protobuf(Arc<protobuf::Declared>),
}

impl Format {
    /// Parses the declared `schema` of `format`; `message` names the Protobuf
    /// message (and is refused for the other formats). The error completes
    /// "the schema ..." and says what to do.
    pub fn parse(format: DataFormat, schema: &str, message: Option<&str>) -> Result<Self, String> {
        let parsed = match (format, message) {
            (DataFormat::Protobuf, None) => {
                return Err(
                    "needs `message`: the full name of the Protobuf message each value holds (message = \"pkg.Click\")"
                        .into(),
                );
            }
            (DataFormat::Json | DataFormat::Avro, Some(_)) => {
                return Err(format!(
                    "takes no `message`: only data_format = \"protobuf\" names one, not {:?}",
                    format.as_str()
                ));
            }
            (DataFormat::Json, None) => Format::Json {
                columns: Arc::new(json_schema::from_json_schema(schema).map_err(|e| format!("does not parse: {e}"))?),
                title: json_schema::title(schema).map(Arc::from),
            },
            (DataFormat::Avro, None) => Format::Avro(Arc::new(
                avro::Declared::parse(schema).map_err(|e| format!("is not a usable Avro schema: {e}"))?,
            )),
            (DataFormat::Protobuf, Some(message)) => {
                Format::Protobuf(Arc::new(protobuf::Declared::parse(schema, message)?))
            }
        };
        check_writable(parsed.columns())?;
        Ok(parsed)
    }

    /// The record's full name, as a record-naming subject strategy uses it:
    /// an Avro record's, a Protobuf message's, a JSON Schema's `title`.
    pub fn record_name(&self) -> Option<&str> {
        match self {
            Self::Json { title, .. } => title.as_deref(),
            Self::Avro(a) => Some(a.schema.name()),
            Self::Protobuf(p) => Some(p.message.full_name()),
        }
    }

    pub fn data_format(&self) -> DataFormat {
        match self {
            Self::Json { .. } => DataFormat::Json,
            Self::Avro(_) => DataFormat::Avro,
            Self::Protobuf(_) => DataFormat::Protobuf,
        }
    }

    /// The declared columns (without the provenance columns).
    pub fn columns(&self) -> &SchemaRef {
        match self {
            Self::Json { columns, .. } => columns,
            Self::Avro(a) => &a.arrow,
            Self::Protobuf(p) => &p.arrow,
        }
    }
}

/// How a topic's keys are encoded, as declared (`key_format`, with
/// `key_schema` and `key_message` for the decoded ones).
#[derive(Debug, Clone)]
pub enum KeyFormat {
    /// The key's bytes as they are: `_key` is `Binary` (the default).
    Bytes,
    /// UTF-8 text: `_key` is `Utf8`.
    String,
    /// A record in a format of its own: `_key` is a struct of its columns.
    Decoded(Format),
}

impl KeyFormat {
    /// As declared (`key_format`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Bytes => "bytes",
            Self::String => "string",
            Self::Decoded(format) => format.data_format().as_str(),
        }
    }

    /// The decoder's key; with `writers`, keys are registry-framed.
    pub fn key(&self, writers: Option<writers::WriterSchemas>) -> Key {
        match self {
            Self::Bytes => Key::Bytes,
            Self::String => Key::String,
            Self::Decoded(format) => Key::Decoded(Part::new(format.clone(), writers)),
        }
    }
}

/// Every column must be one a parquet file can hold (no Arrow unions, no empty structs, …).
fn check_writable(columns: &Schema) -> Result<(), String> {
    for field in columns.fields() {
        let alone = Schema::new(vec![field.as_ref().clone()]);
        if let Err(e) = parquet::arrow::ArrowSchemaConverter::new().convert(&alone) {
            return Err(format!(
                "maps field `{}` to the Arrow type {}, which a parquet table cannot hold ({e}); change that field's type",
                field.name(),
                field.data_type()
            ));
        }
    }
    Ok(())
}

/// One value to decode: its bytes (without registry framing; inflated where
/// the frame compressed them) and, for Avro in registry mode, the text of
/// the schema that wrote it.
#[derive(Debug, Clone)]
pub struct Body<'a> {
    pub bytes: std::borrow::Cow<'a, [u8]>,
    pub writer: Option<Arc<str>>,
}

impl<'a> Body<'a> {
    pub fn plain(bytes: &'a [u8]) -> Self {
        Self { bytes: std::borrow::Cow::Borrowed(bytes), writer: None }
    }
}

/// What a format's decoder made of a list of bodies.
#[derive(Debug, Default)]
pub struct Rows {
    /// The declared columns of the bodies that decoded, in order.
    pub batches: Vec<RecordBatch>,
    /// The bodies that did not (their indexes, ascending) and why.
    pub failed: Vec<(usize, String)>,
}

/// Encodes JSON objects as values of `format`; with `schema_id`, framed as a
/// registry serializer frames them. For producers: the demo, the tests and
/// the benchmark make their messages with it.
pub fn encode_json_values(format: &Format, values: &[String], schema_id: Option<u32>) -> Result<Vec<Vec<u8>>, String> {
    let frame = |body: Vec<u8>, indexes: Option<&[i32]>| match schema_id {
        Some(id) => confluent::frame(id, indexes, &body),
        None => body,
    };
    match format {
        Format::Json { .. } => Ok(values.iter().map(|v| frame(v.clone().into_bytes(), None)).collect()),
        Format::Avro(declared) => {
            let mut decoder = arrow::json::ReaderBuilder::new(declared.arrow.clone())
                .with_batch_size(values.len().max(1))
                .build_decoder()
                .map_err(|e| e.to_string())?;
            for v in values {
                decoder.decode(v.as_bytes()).map_err(|e| e.to_string())?;
            }
            let Some(batch) = decoder.flush().map_err(|e| e.to_string())? else { return Ok(vec![]) };
            avro::encode(&declared.text, &batch, schema_id)
        }
        Format::Protobuf(declared) => {
            let path = protobuf::index_path(&declared.message);
            values.iter().map(|v| Ok(frame(protobuf::encode_json(&declared.message, v)?, Some(&path)))).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_parquet_cannot_hold_is_refused_when_declared() {
        let err =
            Format::parse(DataFormat::Protobuf, "syntax = \"proto3\"; message E {} message M { E e = 1; }", Some("M"))
                .unwrap_err();
        assert!(err.contains("field `e`") && err.contains("parquet"), "{err}");
    }
}
