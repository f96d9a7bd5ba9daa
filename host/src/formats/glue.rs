//! The AWS Glue Schema Registry: its wire format and a client of the one call
//! weir makes, `GetSchemaVersion` (AWS JSON 1.1, signed with SigV4 by
//! object_store's signer, the one weir's S3 store already uses).
//!
//! A Glue-framed value is a header version byte 3, a compression byte (0:
//! none, 5: zlib over the rest), the writer schema version's UUID (16 bytes),
//! then the body. A Protobuf body starts with the message's index (an
//! unsigned varint) among every message of the schema's file, nested ones
//! included, sorted by full name. Glue has no subjects: a schema has a name,
//! which Glue's serializers derive from the topic like Confluent's subjects
//! (`<topic>-value` unless another strategy is chosen).

use std::borrow::Cow;
use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AwsAuthorizer, AwsCredential};
use serde::Deserialize;

use super::registry::{RegisteredSchema, RegistryError, SchemaId, SchemaRegistry, SchemaType, SubjectVersion};

/// The header version byte of Glue's wire format.
const VERSION_BYTE: u8 = 3;
const UNCOMPRESSED: u8 = 0;
const ZLIB: u8 = 5;
/// Header version, compression, UUID.
const HEADER: usize = 18;
/// A compressed body may not inflate past this (a value is at most a few MiB).
const MAX_INFLATED: u64 = 64 << 20;
const TIMEOUT: Duration = Duration::from_secs(10);

/// The schema version a Glue-framed value names, if it is framed.
pub fn schema_version(value: &[u8]) -> Option<u128> {
    match value {
        [VERSION_BYTE, _, rest @ ..] if rest.len() >= 16 => {
            Some(u128::from_be_bytes(rest[..16].try_into().expect("16 bytes")))
        }
        _ => None,
    }
}

/// Splits a Glue-framed value, inflating a compressed body; `protobuf` reads
/// the message index. The error says why it is not one (a dead letter's reason).
pub fn unframe(value: &[u8], protobuf: bool) -> Result<super::registry::Framed<'_>, String> {
    let Some(&version) = value.first() else {
        return Err("the value is empty, but AWS Glue framing needs an 18-byte header (header version byte 3, a compression byte and the schema version's UUID)".into());
    };
    if version != VERSION_BYTE {
        return Err(format!(
            "the value starts with byte 0x{version:02x}, not AWS Glue's header version byte 3: it was not written by a Glue Schema Registry serializer"
        ));
    }
    if value.len() < HEADER {
        return Err(format!(
            "the value is {} bytes long, shorter than AWS Glue's 18-byte header: it is truncated",
            value.len()
        ));
    }
    let uuid = schema_version(value).expect("a full header");
    let id = SchemaId::Glue(uuid);
    let mut body = match value[1] {
        UNCOMPRESSED => Cow::Borrowed(&value[HEADER..]),
        ZLIB => {
            let mut inflated = Vec::with_capacity(value.len() * 4);
            let read = flate2::read::ZlibDecoder::new(&value[HEADER..])
                .take(MAX_INFLATED + 1)
                .read_to_end(&mut inflated)
                .map_err(|e| format!("the zlib-compressed body ({id}) does not inflate: {e}"))?;
            if read as u64 > MAX_INFLATED {
                return Err(format!("the zlib-compressed body ({id}) inflates past {} MiB", MAX_INFLATED >> 20));
            }
            Cow::Owned(inflated)
        }
        other => {
            return Err(format!(
                "the compression byte is 0x{other:02x}, not one AWS Glue writes (0x00: none, 0x05: zlib)"
            ));
        }
    };
    let mut message_indexes = Vec::new();
    if protobuf {
        let mut rest: &[u8] = &body;
        let index = read_uvarint(&mut rest)
            .and_then(|i| i32::try_from(i).ok())
            .ok_or_else(|| format!("the Protobuf message index after {id} is truncated"))?;
        message_indexes.push(index);
        let read = body.len() - rest.len();
        body = match body {
            Cow::Borrowed(b) => Cow::Borrowed(&b[read..]),
            Cow::Owned(mut b) => {
                b.drain(..read);
                Cow::Owned(b)
            }
        };
    }
    Ok(super::registry::Framed { schema_id: id, message_indexes, body })
}

/// Frames `body` as Glue's serializers do (for producers: tests, the benchmark).
pub fn frame(uuid: u128, compress: bool, message_index: Option<u32>, body: &[u8]) -> Vec<u8> {
    let mut plain = Vec::with_capacity(body.len() + 5);
    if let Some(mut index) = message_index {
        while index >= 0x80 {
            plain.push((index as u8) | 0x80);
            index >>= 7;
        }
        plain.push(index as u8);
    }
    plain.extend_from_slice(body);
    let mut out = vec![VERSION_BYTE, if compress { ZLIB } else { UNCOMPRESSED }];
    out.extend_from_slice(&uuid.to_be_bytes());
    if compress {
        use std::io::Write as _;
        let mut encoder = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
        encoder.write_all(&plain).expect("writing to memory");
        encoder.finish().expect("writing to memory")
    } else {
        out.extend_from_slice(&plain);
        out
    }
}

/// An unsigned varint (7 bits a byte, least significant first), taken off the
/// front of `buf`: Glue's Protobuf message index, and under Confluent's
/// zigzag its message indexes too.
pub(super) fn read_uvarint(buf: &mut &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// A blocking client of one Glue registry.
#[derive(Clone)]
pub struct GlueClient {
    agent: ureq::Agent,
    endpoint: Arc<str>,
    /// The endpoint and the registry, for messages.
    label: Arc<str>,
    region: Arc<str>,
    registry: Arc<str>,
    credential: Arc<AwsCredential>,
}

impl std::fmt::Debug for GlueClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlueClient").field("registry", &self.label).finish_non_exhaustive()
    }
}

/// `GetSchemaVersion`'s answer, as far as weir reads it.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GetSchemaVersion {
    schema_version_id: String,
    schema_definition: String,
    data_format: SchemaType,
    #[serde(default)]
    schema_arn: Option<String>,
    version_number: i64,
}

impl GlueClient {
    /// A client of the registry `settings` name, signing with its credentials
    /// or, without them, with this process's `AWS_*` variables.
    pub fn new(settings: &SchemaRegistry) -> Result<Self, RegistryError> {
        let config = |what: &str| RegistryError::Config(format!("an AWS Glue registry needs `{what}`"));
        let region = settings.region.clone().ok_or_else(|| config("region"))?;
        let registry = settings.registry_name.clone().ok_or_else(|| config("registry_name"))?;
        let endpoint = settings.glue_endpoint();
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let credential = match (&settings.access_key_id, &settings.secret_access_key) {
            (Some(key_id), Some(secret_key)) => AwsCredential {
                key_id: key_id.clone(),
                secret_key: secret_key.clone(),
                token: settings.session_token.clone(),
            },
            _ => match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
                (Some(key_id), Some(secret_key)) => {
                    AwsCredential { key_id, secret_key, token: env("AWS_SESSION_TOKEN") }
                }
                _ => {
                    return Err(RegistryError::Config(
                        "no AWS credentials for the Glue registry: set `access_key_id` and `secret_access_key` on the connection, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
                    ));
                }
            },
        };
        let mut agent = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(TIMEOUT));
        if let Some(pem) = &settings.ca_pem {
            let tls = crate::tls::trusting(pem.as_bytes(), "the registry's CA").map_err(RegistryError::Config)?;
            agent = agent.tls_config(tls);
        }
        Ok(Self {
            agent: agent.build().into(),
            label: settings.location().into(),
            endpoint: endpoint.into(),
            region: region.into(),
            registry: registry.into(),
            credential: Arc::new(credential),
        })
    }

    pub fn url(&self) -> &str {
        &self.label
    }

    /// The schema version `uuid`.
    pub fn schema_version(&self, uuid: u128) -> Result<SubjectVersion, RegistryError> {
        let text = super::registry::uuid_text(uuid);
        self.get_schema_version(serde_json::json!({ "SchemaVersionId": text }), None)
    }

    /// `version` (a number, or `latest`) of the schema named `name` in this registry.
    pub fn version(&self, name: &str, version: &str) -> Result<SubjectVersion, RegistryError> {
        let number = match version {
            "latest" => serde_json::json!({ "LatestVersion": true }),
            n => {
                serde_json::json!({ "VersionNumber": n.parse::<i64>().map_err(|_| RegistryError::Config(format!("version {n:?} is not a number")))? })
            }
        };
        let schema_id = serde_json::json!({ "RegistryName": &*self.registry, "SchemaName": name });
        self.get_schema_version(serde_json::json!({ "SchemaId": schema_id, "SchemaVersionNumber": number }), Some(name))
    }

    fn get_schema_version(
        &self,
        request: serde_json::Value,
        name: Option<&str>,
    ) -> Result<SubjectVersion, RegistryError> {
        let v: GetSchemaVersion = self.call("GetSchemaVersion", &request)?;
        let garbled = |detail: String| RegistryError::Garbled { url: self.label.to_string(), detail };
        let uuid = super::registry::parse_uuid(&v.schema_version_id)
            .ok_or_else(|| garbled(format!("SchemaVersionId {:?} is not a UUID", v.schema_version_id)))?;
        // arn:aws:glue:<region>:<account>:schema/<registry>/<name>
        let subject = match (name, &v.schema_arn) {
            (Some(name), _) => name.to_string(),
            (None, Some(arn)) => arn.rsplit('/').next().unwrap_or(arn).to_string(),
            (None, None) => String::new(),
        };
        Ok(SubjectVersion {
            subject,
            version: v.version_number,
            id: SchemaId::Glue(uuid),
            schema: RegisteredSchema { schema_type: v.data_format, schema: v.schema_definition, references: vec![] },
        })
    }

    /// One signed call of Glue's JSON API.
    fn call<T: serde::de::DeserializeOwned>(
        &self,
        action: &str,
        request: &serde_json::Value,
    ) -> Result<T, RegistryError> {
        let url = self.label.to_string();
        let body = serde_json::to_vec(request).expect("JSON of JSON");
        let mut signed: object_store::client::HttpRequest = http::Request::builder()
            .method("POST")
            .uri(format!("{}/", self.endpoint))
            .header("content-type", "application/x-amz-json-1.1")
            .header("x-amz-target", format!("AWSGlue.{action}"))
            .body(body.clone().into())
            .map_err(|e| RegistryError::Config(format!("the endpoint {:?} is not a usable URL: {e}", self.endpoint)))?;
        AwsAuthorizer::new(&self.credential, "glue", &self.region)
            .try_authorize(&mut signed, None)
            .map_err(|e| RegistryError::Config(format!("signing the request failed: {e}")))?;
        let mut call = self.agent.post(format!("{}/", self.endpoint));
        for (name, value) in signed.headers() {
            call = call.header(name.as_str(), value.as_bytes());
        }
        let unreachable = |e: ureq::Error| RegistryError::Unreachable { url: url.clone(), detail: e.to_string() };
        let mut response = call.send(&body[..]).map_err(unreachable)?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(unreachable)?;
        if (200..300).contains(&status) {
            return serde_json::from_str(&text).map_err(|e| RegistryError::Garbled { url, detail: e.to_string() });
        }
        #[derive(Deserialize)]
        struct Error {
            #[serde(rename = "__type")]
            kind: Option<String>,
            #[serde(alias = "Message")]
            message: Option<String>,
        }
        let error: Error = serde_json::from_str(&text).unwrap_or(Error { kind: None, message: None });
        // `__type` may carry a namespace: `com.amazonaws.glue#EntityNotFoundException`.
        let kind = error.kind.as_deref().map(|k| k.rsplit('#').next().unwrap_or(k).to_string());
        let message = error.message.unwrap_or_else(|| text.chars().take(200).collect());
        Err(match kind {
            Some(kind) if kind == "EntityNotFoundException" => RegistryError::NotFound { url, message },
            Some(kind) => RegistryError::Aws { url, status, kind, message },
            None => RegistryError::Refused { url, status, code: None, message },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips_compressed_or_not_and_every_bad_frame_says_why() {
        let uuid = 0x0123_4567_89ab_cdef_0011_2233_4455_6677u128;
        for compress in [false, true] {
            let framed = frame(uuid, compress, None, b"a body, a body, a body");
            assert_eq!(schema_version(&framed), Some(uuid));
            let split = unframe(&framed, false).unwrap();
            assert_eq!((split.schema_id, &*split.body), (SchemaId::Glue(uuid), &b"a body, a body, a body"[..]));
            assert_eq!(matches!(split.body, Cow::Borrowed(_)), !compress);
            let framed = frame(uuid, compress, Some(300), b"\x08\x01");
            let proto = unframe(&framed, true).unwrap();
            assert_eq!((proto.message_indexes, &*proto.body), (vec![300], &b"\x08\x01"[..]));
        }
        assert_eq!(SchemaId::Glue(uuid).to_string(), "schema version 01234567-89ab-cdef-0011-223344556677");
        assert!(unframe(b"", false).unwrap_err().contains("empty"));
        assert!(unframe(&[0, 0, 0, 0, 1, 7], false).unwrap_err().contains("not AWS Glue's header version byte 3"));
        assert!(unframe(&[3, 0, 1], false).unwrap_err().contains("3 bytes long"));
        let mut odd = frame(uuid, false, None, b"x");
        odd[1] = 9;
        assert!(unframe(&odd, false).unwrap_err().contains("compression byte is 0x09"));
        let mut broken = frame(uuid, true, None, b"some body");
        broken.truncate(HEADER + 3);
        assert!(unframe(&broken, false).unwrap_err().contains("does not inflate"));
        let bomb = frame(uuid, true, None, &vec![0u8; (MAX_INFLATED + 10) as usize]);
        assert!(unframe(&bomb, false).unwrap_err().contains("inflates past 64 MiB"));
    }

    #[test]
    fn a_protobuf_index_counts_every_message_of_the_file_sorted_by_full_name() {
        use crate::formats::protobuf::{ProtoFile, compile, message_by_glue_index};
        let source =
            "syntax = \"proto3\";\npackage p;\nmessage B { message C {} message A { message D {} } }\nmessage Z {}\n";
        let files = std::collections::HashMap::from([("f.proto".to_string(), ProtoFile::Source(source.into()))]);
        let pool = compile("f.proto", files).unwrap();
        let names: Vec<String> = (0..6)
            .map_while(|i| message_by_glue_index(&pool, "f.proto", i))
            .map(|m| m.full_name().to_string())
            .collect();
        assert_eq!(names, ["p.B", "p.B.A", "p.B.A.D", "p.B.C", "p.Z"]);
    }
}
