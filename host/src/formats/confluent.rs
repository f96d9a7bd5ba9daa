//! A Confluent-compatible schema registry: its wire format and a client of
//! the REST calls weir makes.
//!
//! A framed value is a magic byte 0, the writer schema's id (4 bytes, big
//! endian), for Protobuf the path of the message in the schema's file
//! (zig-zag varints: a count, then the indexes; a lone 0 means the first
//! message), then the encoded body.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use base64::prelude::{BASE64_STANDARD, Engine as _};
use serde::Deserialize;

use super::registry::{Framed, RegisteredSchema, RegistryError, SchemaId, SchemaRegistry, SchemaType, SubjectVersion};

/// The registry's media type: what its clients send and ask for.
pub const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// How long one call to the registry may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Splits a Confluent-framed value; `protobuf` reads the message-index path too.
pub(super) fn unframe(value: &[u8], protobuf: bool) -> Result<Framed<'_>, String> {
    let Some(&magic) = value.first() else {
        return Err(
            "the value is empty, but schema-registry framing needs a 5-byte header (magic byte 0 and the schema id)"
                .into(),
        );
    };
    if magic != 0 {
        return Err(format!(
            "the value starts with byte 0x{magic:02x}, not the schema registry's magic byte 0: it was not written by a schema-registry serializer"
        ));
    }
    if value.len() < 5 {
        return Err(format!(
            "the value is {} bytes long, shorter than the schema registry's 5-byte header: it is truncated",
            value.len()
        ));
    }
    let schema_id = u32::from_be_bytes([value[1], value[2], value[3], value[4]]);
    let mut rest = &value[5..];
    let mut message_indexes = Vec::new();
    if protobuf {
        let truncated = || format!("the Protobuf message-index path after schema id {schema_id} is truncated");
        let count = read_zigzag(&mut rest).ok_or_else(truncated)?;
        if count == 0 {
            message_indexes.push(0);
        } else if !(0..=64).contains(&count) {
            return Err(format!("the Protobuf message-index path after schema id {schema_id} claims {count} indexes"));
        } else {
            for _ in 0..count {
                let index = read_zigzag(&mut rest).ok_or_else(truncated)?;
                message_indexes.push(i32::try_from(index).map_err(|_| truncated())?);
            }
        }
    }
    Ok(Framed { schema_id: SchemaId::Confluent(schema_id), message_indexes, body: Cow::Borrowed(rest) })
}

/// Frames `body` as a schema-registry serializer does (for producers: the demo, tests, benchmark).
pub fn frame(schema_id: u32, message_indexes: Option<&[i32]>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    out.push(0);
    out.extend_from_slice(&schema_id.to_be_bytes());
    match message_indexes {
        None => {}
        Some([0]) | Some([]) => out.push(0),
        Some(indexes) => {
            write_zigzag(&mut out, indexes.len() as i64);
            for i in indexes {
                write_zigzag(&mut out, *i as i64);
            }
        }
    }
    out.extend_from_slice(body);
    out
}

fn read_zigzag(buf: &mut &[u8]) -> Option<i64> {
    let value = super::glue::read_uvarint(buf)?;
    Some(((value >> 1) as i64) ^ -((value & 1) as i64))
}

fn write_zigzag(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A subject's version as a Confluent registry answers it.
#[derive(Deserialize)]
struct ConfluentVersion {
    subject: String,
    version: i64,
    id: u32,
    #[serde(flatten)]
    schema: RegisteredSchema,
}

#[derive(Deserialize)]
struct ErrorBody {
    error_code: Option<i64>,
    message: Option<String>,
}

/// A blocking client of a Confluent-compatible registry's REST API.
#[derive(Clone)]
pub struct ConfluentClient {
    agent: ureq::Agent,
    base: Arc<str>,
    authorization: Option<Arc<str>>,
}

impl std::fmt::Debug for ConfluentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfluentClient").field("url", &self.base).finish_non_exhaustive()
    }
}

impl ConfluentClient {
    pub fn new(settings: &SchemaRegistry) -> Result<Self, RegistryError> {
        let base = settings.url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(RegistryError::Config(format!("the URL {base:?} must start with http:// or https://")));
        }
        let mut config = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(TIMEOUT));
        if let Some(pem) = &settings.ca_pem {
            let tls = crate::tls::trusting(pem.as_bytes(), "the registry's CA").map_err(RegistryError::Config)?;
            config = config.tls_config(tls);
        }
        let authorization = match (&settings.username, &settings.password) {
            (Some(user), password) => {
                let pair = format!("{user}:{}", password.as_deref().unwrap_or_default());
                Some(format!("Basic {}", BASE64_STANDARD.encode(pair)).into())
            }
            _ => None,
        };
        Ok(Self { agent: config.build().into(), base: base.into(), authorization })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, RegistryError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent.get(&url).header("Accept", CONTENT_TYPE);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth.as_ref());
        }
        let base = self.base.to_string();
        let mut response =
            request.call().map_err(|e| RegistryError::Unreachable { url: base.clone(), detail: e.to_string() })?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| RegistryError::Unreachable { url: base.clone(), detail: e.to_string() })?;
        if !(200..300).contains(&status) {
            let (code, message) = match serde_json::from_str::<ErrorBody>(&text) {
                Ok(body) => (body.error_code, body.message.unwrap_or(text)),
                Err(_) => (None, text.chars().take(200).collect()),
            };
            return Err(RegistryError::Refused { url: base, status, code, message });
        }
        serde_json::from_str(&text).map_err(|e| RegistryError::Garbled { url: base, detail: e.to_string() })
    }

    /// The schema with `id`. Protobuf schemas are asked for as serialized
    /// descriptors (`format=serialized`), which need no .proto parser to read.
    pub fn schema(&self, id: u32, schema_type: SchemaType) -> Result<RegisteredSchema, RegistryError> {
        self.get(&format!("/schemas/ids/{id}{}", format_query(schema_type)))
    }

    /// `version` (a number, or `latest`) of `subject`.
    pub fn version(
        &self,
        subject: &str,
        version: &str,
        schema_type: SchemaType,
    ) -> Result<SubjectVersion, RegistryError> {
        let v: ConfluentVersion =
            self.get(&format!("/subjects/{}/versions/{version}{}", encode_path(subject), format_query(schema_type)))?;
        Ok(SubjectVersion { subject: v.subject, version: v.version, id: SchemaId::Confluent(v.id), schema: v.schema })
    }
}

fn format_query(schema_type: SchemaType) -> &'static str {
    match schema_type {
        SchemaType::Protobuf => "?format=serialized",
        _ => "",
    }
}

/// Percent-encodes a path segment (subject names may hold `/`, `:` and more).
pub fn encode_path(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips_and_every_bad_frame_says_why() {
        let avro = frame(42, None, b"body");
        assert_eq!(
            unframe(&avro, false),
            Ok(Framed { schema_id: SchemaId::Confluent(42), message_indexes: vec![], body: Cow::Borrowed(b"body") })
        );
        let first = frame(7, Some(&[0]), b"x");
        assert_eq!(first[5], 0, "the first message is written as a single 0");
        assert_eq!(unframe(&first, true).unwrap().message_indexes, [0]);
        let nested = frame(7, Some(&[1, 0, 2]), b"x");
        assert_eq!(
            unframe(&nested, true),
            Ok(Framed { schema_id: SchemaId::Confluent(7), message_indexes: vec![1, 0, 2], body: Cow::Borrowed(b"x") })
        );

        assert!(unframe(b"", false).unwrap_err().contains("empty"));
        assert!(
            unframe(b"{\"a\":1}", false)
                .unwrap_err()
                .contains("starts with byte 0x7b, not the schema registry's magic byte 0")
        );
        assert!(unframe(&[0, 0, 1], false).unwrap_err().contains("3 bytes long"));
        assert!(
            unframe(&[0, 0, 0, 0, 9, 0x84], true)
                .unwrap_err()
                .contains("message-index path after schema id 9 is truncated")
        );
    }
}
