//! What the embedded registry keeps and the rules it keeps them by: schemas
//! by id, subjects and their versions, compatibility levels; registering a
//! version (validated, deduplicated, checked against the subject's level by
//! each format's reading rules), and Protobuf schemas compiled with their
//! references. Errors carry Confluent's codes.

use std::collections::{BTreeMap, HashMap};

use axum::http::StatusCode;
use base64::prelude::{BASE64_STANDARD, Engine as _};
use prost_reflect::prost::Message as _;
use serde_json::Value;

use crate::formats::registry::{PROTO_MAIN, Reference, RegisteredSchema, SchemaType, proto_files};
use crate::formats::{avro_schema::AvroSchema, json_schema, protobuf};

#[derive(Debug, Clone)]
pub(super) struct Stored {
    pub(super) schema_type: SchemaType,
    pub(super) schema: String,
    pub(super) references: Vec<Reference>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Version {
    pub(super) version: i64,
    pub(super) id: u32,
    pub(super) deleted: bool,
}

#[derive(Default)]
pub(super) struct Store {
    /// Schemas by id (id = index + 1).
    pub(super) schemas: Vec<Stored>,
    pub(super) subjects: BTreeMap<String, Vec<Version>>,
    pub(super) global_level: Option<String>,
    pub(super) levels: HashMap<String, String>,
}

/// A registry error: an HTTP status and Confluent's `error_code`.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) status: StatusCode,
    pub(super) code: i64,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }
    pub(super) fn subject(subject: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, 40401, format!("Subject '{subject}' not found."))
    }
    pub(super) fn version(version: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, 40402, format!("Version {version} not found."))
    }
    pub(super) fn schema(id: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::NOT_FOUND, 40403, format!("Schema {id} not found"))
    }
    pub(super) fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, 42201, message)
    }
}

pub(super) fn uses_of(store: &Store, id: u32) -> Vec<(String, i64)> {
    let mut uses = Vec::new();
    for (subject, versions) in &store.subjects {
        for v in versions.iter().filter(|v| v.id == id && !v.deleted) {
            uses.push((subject.clone(), v.version));
        }
    }
    uses
}

pub(super) fn live(store: &Store, subject: &str) -> Result<Vec<Version>, Failure> {
    let versions: Vec<Version> =
        store.subjects.get(subject).map(|v| v.iter().filter(|v| !v.deleted).copied().collect()).unwrap_or_default();
    if versions.is_empty() { Err(Failure::subject(subject)) } else { Ok(versions) }
}

pub(super) fn find_version(store: &Store, subject: &str, version: &str) -> Result<Version, Failure> {
    let versions = live(store, subject)?;
    match version {
        "latest" | "-1" => Ok(*versions.last().expect("live versions are not empty")),
        number => {
            let n: i64 = number.parse().map_err(|_| {
                Failure::new(StatusCode::UNPROCESSABLE_ENTITY, 42202, format!("The specified version '{number}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""))
            })?;
            versions.into_iter().find(|v| v.version == n).ok_or_else(|| Failure::version(number))
        }
    }
}

pub(super) fn level(store: &Store, subject: &str) -> String {
    store.levels.get(subject).or(store.global_level.as_ref()).cloned().unwrap_or_else(|| "BACKWARD".to_string())
}

/// Registers `stored` under `subject`: the same schema again is the version it
/// already is; a schema known under another subject keeps its id.
pub(super) fn register(store: &mut Store, subject: &str, stored: Stored) -> Result<(u32, i64), Failure> {
    validate(store, &stored)?;
    let key = canonical(&stored);
    let live_versions: Vec<Version> =
        store.subjects.get(subject).map(|v| v.iter().filter(|v| !v.deleted).copied().collect()).unwrap_or_default();
    if let Some(v) = live_versions.iter().find(|v| canonical(&store.schemas[v.id as usize - 1]) == key) {
        return Ok((v.id, v.version));
    }
    let level = level(store, subject);
    let transitive = level.ends_with("_TRANSITIVE");
    let against: Vec<&Version> =
        if transitive { live_versions.iter().collect() } else { live_versions.last().into_iter().collect() };
    for v in against {
        if let Err(reason) = check_level(&level, &stored, &store.schemas[v.id as usize - 1]) {
            return Err(Failure::new(
                StatusCode::CONFLICT,
                409,
                format!(
                    "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{reason}]"
                ),
            ));
        }
    }
    let id = match store.schemas.iter().position(|s| canonical(s) == key) {
        Some(i) => i as u32 + 1,
        None => {
            store.schemas.push(stored);
            store.schemas.len() as u32
        }
    };
    let versions = store.subjects.entry(subject.to_string()).or_default();
    let version = versions.iter().map(|v| v.version).max().unwrap_or(0) + 1;
    versions.push(Version { version, id, deleted: false });
    Ok((id, version))
}

/// A schema's identity: whitespace-free JSON for Avro and JSON Schema, the text for Protobuf.
pub(super) fn canonical(stored: &Stored) -> (SchemaType, String, String) {
    let text = match stored.schema_type {
        SchemaType::Avro | SchemaType::Json => serde_json::from_str::<Value>(&stored.schema)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| stored.schema.clone()),
        SchemaType::Protobuf => stored.schema.trim().to_string(),
    };
    (stored.schema_type, text, serde_json::to_string(&stored.references).unwrap_or_default())
}

pub(super) fn validate(store: &Store, stored: &Stored) -> Result<(), Failure> {
    match stored.schema_type {
        SchemaType::Avro => avro_standalone(store, stored)
            .and_then(|text| AvroSchema::parse_any(&text).map_err(|e| e.to_string()))
            .map(|_| ())
            .map_err(|e| Failure::invalid(format!("Invalid schema {}: {e}", stored.schema))),
        SchemaType::Json => serde_json::from_str::<Value>(&stored.schema)
            .ok()
            .filter(Value::is_object)
            .map(|_| ())
            .ok_or_else(|| Failure::invalid(format!("Invalid schema {}: not a JSON Schema object", stored.schema))),
        SchemaType::Protobuf => compile_proto(store, stored).map(|_| ()).map_err(Failure::invalid),
    }
}

/// Whether `new` may follow `old` at `level` (BACKWARD: `new` reads what `old` wrote).
pub(super) fn check_level(level: &str, new: &Stored, old: &Stored) -> Result<(), String> {
    let backward = || can_read(new, old);
    let forward = || can_read(old, new);
    match level.trim_end_matches("_TRANSITIVE") {
        "NONE" => Ok(()),
        "BACKWARD" => backward(),
        "FORWARD" => forward(),
        _ => backward().and_then(|()| forward()),
    }
}

fn can_read(reader: &Stored, writer: &Stored) -> Result<(), String> {
    if reader.schema_type != writer.schema_type {
        return Err(format!(
            "the schema type changed from {} to {}",
            writer.schema_type.as_str(),
            reader.schema_type.as_str()
        ));
    }
    match reader.schema_type {
        SchemaType::Avro => {
            let (r, w) = (AvroSchema::parse_any(&reader.schema), AvroSchema::parse_any(&writer.schema));
            match (r, w) {
                (Ok(r), Ok(w)) => r.can_read(&w).map_err(|e| e.to_string()),
                _ => Ok(()),
            }
        }
        SchemaType::Json => {
            let (r, w) = (json_schema::from_json_schema(&reader.schema), json_schema::from_json_schema(&writer.schema));
            match (r, w) {
                (Ok(r), Ok(w)) => json_schema::check_compatible(&w, &r),
                // Constructs weir's JSON Schema reader does not map are not checked here.
                _ => Ok(()),
            }
        }
        SchemaType::Protobuf => Ok(()),
    }
}

/// A stored Avro schema with the named types its references define inlined where first used.
fn avro_standalone(store: &Store, stored: &Stored) -> Result<String, String> {
    if stored.references.is_empty() {
        return Ok(stored.schema.clone());
    }
    let (mut texts, mut seen, mut open) = (Vec::new(), Vec::new(), stored.references.clone());
    while let Some(r) = open.pop() {
        if seen.contains(&(r.subject.clone(), r.version)) {
            continue;
        }
        seen.push((r.subject.clone(), r.version));
        let v = find_version(store, &r.subject, &r.version.to_string())
            .map_err(|_| format!("reference {} (subject {} version {}) not found", r.name, r.subject, r.version))?;
        let referenced = &store.schemas[v.id as usize - 1];
        texts.push(referenced.schema.clone());
        open.extend(referenced.references.iter().cloned());
    }
    crate::formats::avro_references::inline_references(&stored.schema, &texts)
}

/// Compiles a stored Protobuf schema with the references it imports; returns the pool and its file name.
fn compile_proto(store: &Store, stored: &Stored) -> Result<(prost_reflect::DescriptorPool, String), String> {
    let files = proto_files::<String>(&stored.schema, &stored.references, &mut |r| {
        let v = find_version(store, &r.subject, &r.version.to_string()).map_err(|_| {
            format!("Invalid schema: reference {} (subject {} version {}) not found", r.name, r.subject, r.version)
        })?;
        let referenced = &store.schemas[v.id as usize - 1];
        Ok(RegisteredSchema {
            schema_type: referenced.schema_type,
            schema: referenced.schema.clone(),
            references: referenced.references.clone(),
        })
    })?;
    let pool = protobuf::compile(PROTO_MAIN, files).map_err(|e| format!("Invalid schema: {e}"))?;
    Ok((pool, PROTO_MAIN.to_string()))
}

/// A stored Protobuf schema as a base64 serialized `FileDescriptorProto`.
pub(super) fn serialized_proto(store: &Store, stored: &Stored) -> Result<String, String> {
    if let protobuf::ProtoFile::Descriptor(_) = protobuf::ProtoFile::registered(&stored.schema) {
        return Ok(stored.schema.trim().to_string());
    }
    let (pool, main) = compile_proto(store, stored)?;
    let file = pool.get_file_by_name(&main).ok_or("Invalid schema: the compiled file is missing")?;
    Ok(BASE64_STANDARD.encode(file.file_descriptor_proto().encode_to_vec()))
}
