//! An in-process schema registry: the REST subset of Confluent's Schema
//! Registry that serializers, deserializers and weir use, on a loopback
//! port. `weir demo --format avro|protobuf` runs on it, and so do the tests
//! (which drive it with Confluent's own Python client to prove it answers as
//! the real one does).
//!
//! What it serves: schemas by id (`GET /schemas/ids/{id}`, with `/versions`
//! and `/subjects`), subjects and their versions (`GET /subjects`,
//! `/subjects/{s}/versions[/{v}[/schema]]`, `DELETE`), registration
//! (`POST /subjects/{s}/versions`), lookup (`POST /subjects/{s}`),
//! compatibility (`POST /compatibility/subjects/{s}/versions/{v}`, enforced on
//! registration by the subject's or the global level), `GET/PUT /config[/{s}]`,
//! `GET /mode`, `GET /schemas/types`; Confluent's error codes (40401 subject
//! not found, 40402 version not found, 40403 schema not found, 42201 invalid
//! schema, 409 incompatible) and media type; optional basic authentication.
//!
//! One difference: a Protobuf schema registered as a serialized descriptor is
//! served back as such, where Confluent's prints it as `.proto` text; asked for
//! with `format=serialized` (as weir and Confluent's deserializers ask) both
//! answer the same. Text `.proto` schemas are compiled to answer that.
//!
//! This module is the REST surface; `store` what it keeps and the rules a
//! new version must pass.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::prelude::{BASE64_STANDARD, Engine as _};
use serde::Deserialize;
use serde_json::{Value, json};

mod store;

use crate::formats::confluent::CONTENT_TYPE;
use crate::formats::registry::{Reference, SchemaType};
use store::{
    Failure, Store, Stored, Version, canonical, check_level, find_version, level, live, register, serialized_proto,
    uses_of, validate,
};

struct Shared {
    store: Mutex<Store>,
    /// `Basic <base64(user:password)>` the registry requires, if any.
    authorization: Option<String>,
}

/// A running registry; [`EmbeddedRegistry::stop`] and [`EmbeddedRegistry::resume`] make an outage.
pub struct EmbeddedRegistry {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Option<(tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>)>,
    /// While stopped: the port, bound but not listening (see [`hold`]).
    held: Option<std::os::fd::OwnedFd>,
}

impl EmbeddedRegistry {
    /// Starts a registry on a free loopback port.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(None)
    }

    /// Starts one that requires basic authentication with these credentials.
    pub fn start_with_credentials(username: &str, password: &str) -> anyhow::Result<Self> {
        Self::start_with(Some(format!("Basic {}", BASE64_STANDARD.encode(format!("{username}:{password}")))))
    }

    fn start_with(authorization: Option<String>) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared { store: Mutex::default(), authorization });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding the embedded registry")?;
        let addr = listener.local_addr()?;
        let mut registry = Self { shared, addr, server: None, held: None };
        registry.serve(listener)?;
        Ok(registry)
    }

    fn serve(&mut self, listener: std::net::TcpListener) -> anyhow::Result<()> {
        listener.set_nonblocking(true)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = router(self.shared.clone());
        let thread = std::thread::Builder::new().name("weir-registry".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("registry runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("registry listener");
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        })?;
        self.server = Some((stop, thread));
        Ok(())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Takes the registry away: its port refuses connections until [`EmbeddedRegistry::resume`].
    pub fn stop(&mut self) {
        if let Some((stop, thread)) = self.server.take() {
            let _ = stop.send(());
            let _ = thread.join();
            self.held = hold(self.addr);
        }
    }

    /// Serves again on the same port, with everything it held.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        if self.server.is_none() {
            self.held = None;
            let listener = std::net::TcpListener::bind(self.addr).context("binding the embedded registry again")?;
            self.serve(listener)?;
        }
        Ok(())
    }

    /// Registers a schema under `subject` (what a serializer does over HTTP); returns its id.
    pub fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
        references: Vec<Reference>,
    ) -> Result<u32, String> {
        let mut store = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        register(&mut store, subject, Stored { schema_type, schema: schema.to_string(), references })
            .map(|(id, _)| id)
            .map_err(|e| e.message)
    }

    /// The ids of `subject`'s versions, oldest first.
    pub fn ids(&self, subject: &str) -> Vec<u32> {
        let store = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        store.subjects.get(subject).into_iter().flatten().filter(|v| !v.deleted).map(|v| v.id).collect()
    }

    /// Sets a subject's compatibility level (`NONE`, `BACKWARD`, …).
    pub fn set_compatibility(&self, subject: &str, level: &str) {
        let mut store = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        store.levels.insert(subject.to_string(), level.to_string());
    }
}

impl Drop for EmbeddedRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(|| async { reply(StatusCode::OK, json!({})) }))
        .route("/schemas/types", get(|| async { reply(StatusCode::OK, json!(["JSON", "PROTOBUF", "AVRO"])) }))
        .route("/schemas/ids/{id}", get(schema_by_id))
        .route("/schemas/ids/{id}/schema", get(raw_schema_by_id))
        .route("/schemas/ids/{id}/versions", get(versions_of_id))
        .route("/schemas/ids/{id}/subjects", get(subjects_of_id))
        .route("/subjects", get(subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(versions).post(register_version))
        .route("/subjects/{subject}/versions/{version}", get(version).delete(delete_version))
        .route("/subjects/{subject}/versions/{version}/schema", get(raw_version))
        .route("/compatibility/subjects/{subject}/versions/{version}", post(compatibility))
        .route("/config", get(global_config).put(set_global_config))
        .route("/config/{subject}", get(subject_config).put(set_subject_config))
        .route("/mode", get(|| async { reply(StatusCode::OK, json!({"mode": "READWRITE"})) }))
        .fallback(|| async { Failure::new(StatusCode::NOT_FOUND, 404, "HTTP 404 Not Found") })
        .layer(axum::middleware::from_fn_with_state(shared.clone(), authenticate))
        .with_state(shared)
}

type Shared_ = State<Arc<Shared>>;

async fn authenticate(
    State(shared): Shared_,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(expected) = &shared.authorization {
        let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if given != Some(expected.as_str()) {
            return Failure::new(StatusCode::UNAUTHORIZED, 401, "Unauthorized").into_response();
        }
    }
    next.run(request).await
}

fn reply(status: StatusCode, body: Value) -> Response {
    (status, [(header::CONTENT_TYPE, CONTENT_TYPE)], body.to_string()).into_response()
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        reply(self.status, json!({"error_code": self.code, "message": self.message}))
    }
}

type Answer = Result<Response, Failure>;

fn store(shared: &Shared) -> std::sync::MutexGuard<'_, Store> {
    shared.store.lock().unwrap_or_else(|e| e.into_inner())
}

/// Query parameters, as clients send them (`true`, `True`, …).
#[derive(Deserialize, Default)]
struct Params {
    format: Option<String>,
    deleted: Option<String>,
    #[serde(rename = "defaultToGlobal")]
    default_to_global: Option<String>,
}

fn yes(flag: &Option<String>) -> bool {
    flag.as_deref().is_some_and(|f| f.eq_ignore_ascii_case("true"))
}

/// The fields of a schema in an answer: `schemaType` only when not Avro, `references` only when there are some.
fn schema_fields(store: &Store, id: u32, format: Option<&str>) -> Result<serde_json::Map<String, Value>, Failure> {
    let stored = store.schemas.get(id as usize - 1).ok_or_else(|| Failure::schema(id))?;
    let mut out = serde_json::Map::new();
    if stored.schema_type != SchemaType::Avro {
        out.insert("schemaType".into(), json!(stored.schema_type.as_str()));
    }
    let schema = match (stored.schema_type, format) {
        (SchemaType::Protobuf, Some("serialized")) => serialized_proto(store, stored).map_err(Failure::invalid)?,
        _ => stored.schema.clone(),
    };
    out.insert("schema".into(), json!(schema));
    if !stored.references.is_empty() {
        out.insert("references".into(), json!(stored.references));
    }
    Ok(out)
}

fn id_param(id: &str) -> Result<u32, Failure> {
    id.parse::<u32>().ok().filter(|id| *id > 0).ok_or_else(|| Failure::schema(id))
}

async fn schema_by_id(State(shared): Shared_, Path(id): Path<String>, Query(q): Query<Params>) -> Answer {
    let id = id_param(&id)?;
    let store = store(&shared);
    Ok(reply(StatusCode::OK, Value::Object(schema_fields(&store, id, q.format.as_deref())?)))
}

async fn raw_schema_by_id(State(shared): Shared_, Path(id): Path<String>) -> Answer {
    let id = id_param(&id)?;
    let store = store(&shared);
    let stored = store.schemas.get(id as usize - 1).ok_or_else(|| Failure::schema(id))?;
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], stored.schema.clone()).into_response())
}

async fn versions_of_id(State(shared): Shared_, Path(id): Path<String>) -> Answer {
    let id = id_param(&id)?;
    let store = store(&shared);
    store.schemas.get(id as usize - 1).ok_or_else(|| Failure::schema(id))?;
    let uses: Vec<Value> = uses_of(&store, id).into_iter().map(|(s, v)| json!({"subject": s, "version": v})).collect();
    Ok(reply(StatusCode::OK, json!(uses)))
}

async fn subjects_of_id(State(shared): Shared_, Path(id): Path<String>) -> Answer {
    let id = id_param(&id)?;
    let store = store(&shared);
    store.schemas.get(id as usize - 1).ok_or_else(|| Failure::schema(id))?;
    let mut subjects: Vec<String> = uses_of(&store, id).into_iter().map(|(s, _)| s).collect();
    subjects.dedup();
    Ok(reply(StatusCode::OK, json!(subjects)))
}

async fn subjects(State(shared): Shared_) -> Answer {
    let store = store(&shared);
    let names: Vec<&String> =
        store.subjects.iter().filter(|(_, v)| v.iter().any(|v| !v.deleted)).map(|(s, _)| s).collect();
    Ok(reply(StatusCode::OK, json!(names)))
}

async fn versions(State(shared): Shared_, Path(subject): Path<String>) -> Answer {
    let store = store(&shared);
    let numbers: Vec<i64> = live(&store, &subject)?.iter().map(|v| v.version).collect();
    Ok(reply(StatusCode::OK, json!(numbers)))
}

fn version_body(store: &Store, subject: &str, v: Version, format: Option<&str>) -> Result<Value, Failure> {
    let mut body = serde_json::Map::new();
    body.insert("subject".into(), json!(subject));
    body.insert("version".into(), json!(v.version));
    body.insert("id".into(), json!(v.id));
    body.extend(schema_fields(store, v.id, format)?);
    Ok(Value::Object(body))
}

async fn version(
    State(shared): Shared_,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Answer {
    let store = store(&shared);
    let v = find_version(&store, &subject, &version)?;
    Ok(reply(StatusCode::OK, version_body(&store, &subject, v, q.format.as_deref())?))
}

async fn raw_version(State(shared): Shared_, Path((subject, version)): Path<(String, String)>) -> Answer {
    let store = store(&shared);
    let v = find_version(&store, &subject, &version)?;
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], store.schemas[v.id as usize - 1].schema.clone())
        .into_response())
}

async fn delete_subject(State(shared): Shared_, Path(subject): Path<String>) -> Answer {
    let mut store = store(&shared);
    let numbers: Vec<i64> = live(&store, &subject)?.iter().map(|v| v.version).collect();
    for v in store.subjects.get_mut(&subject).into_iter().flatten() {
        v.deleted = true;
    }
    Ok(reply(StatusCode::OK, json!(numbers)))
}

async fn delete_version(State(shared): Shared_, Path((subject, version)): Path<(String, String)>) -> Answer {
    let mut store = store(&shared);
    let found = find_version(&store, &subject, &version)?;
    for v in store.subjects.get_mut(&subject).into_iter().flatten().filter(|v| v.version == found.version) {
        v.deleted = true;
    }
    Ok(reply(StatusCode::OK, json!(found.version)))
}

#[derive(Deserialize)]
struct SchemaRequest {
    schema: String,
    #[serde(default, rename = "schemaType")]
    schema_type: SchemaType,
    #[serde(default)]
    references: Vec<Reference>,
}

fn parse_request(body: &Bytes) -> Result<Stored, Failure> {
    let request: SchemaRequest = serde_json::from_slice(body).map_err(|e| {
        Failure::new(StatusCode::UNPROCESSABLE_ENTITY, 422, format!("Unrecognized field or bad JSON: {e}"))
    })?;
    Ok(Stored { schema_type: request.schema_type, schema: request.schema, references: request.references })
}

async fn register_version(State(shared): Shared_, Path(subject): Path<String>, body: Bytes) -> Answer {
    let stored = parse_request(&body)?;
    let mut store = store(&shared);
    let (id, _) = register(&mut store, &subject, stored)?;
    Ok(reply(StatusCode::OK, json!({"id": id})))
}

async fn lookup(State(shared): Shared_, Path(subject): Path<String>, Query(q): Query<Params>, body: Bytes) -> Answer {
    let stored = parse_request(&body)?;
    let store = store(&shared);
    let versions: Vec<Version> = store
        .subjects
        .get(&subject)
        .map(|v| v.iter().filter(|v| !v.deleted || yes(&q.deleted)).copied().collect())
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(Failure::subject(&subject));
    }
    let key = canonical(&stored);
    let found = versions.iter().rev().find(|v| canonical(&store.schemas[v.id as usize - 1]) == key);
    match found {
        Some(v) => Ok(reply(StatusCode::OK, version_body(&store, &subject, *v, None)?)),
        None => Err(Failure::new(StatusCode::NOT_FOUND, 40403, "Schema not found")),
    }
}

async fn compatibility(
    State(shared): Shared_,
    Path((subject, version)): Path<(String, String)>,
    body: Bytes,
) -> Answer {
    let stored = parse_request(&body)?;
    let store = store(&shared);
    validate(&store, &stored)?;
    // A subject with no versions yet is compatible with anything.
    let against: Vec<Version> = match live(&store, &subject) {
        Ok(_) => vec![find_version(&store, &subject, &version)?],
        Err(_) => vec![],
    };
    let level = level(&store, &subject);
    let messages: Vec<String> =
        against.iter().filter_map(|v| check_level(&level, &stored, &store.schemas[v.id as usize - 1]).err()).collect();
    Ok(reply(StatusCode::OK, json!({"is_compatible": messages.is_empty(), "messages": messages})))
}

async fn global_config(State(shared): Shared_) -> Answer {
    let store = store(&shared);
    Ok(reply(
        StatusCode::OK,
        json!({"compatibilityLevel": store.global_level.clone().unwrap_or_else(|| "BACKWARD".into())}),
    ))
}

async fn subject_config(State(shared): Shared_, Path(subject): Path<String>, Query(q): Query<Params>) -> Answer {
    let store = store(&shared);
    match store.levels.get(&subject) {
        Some(level) => Ok(reply(StatusCode::OK, json!({"compatibilityLevel": level}))),
        None if yes(&q.default_to_global) => {
            Ok(reply(StatusCode::OK, json!({"compatibilityLevel": level(&store, &subject)})))
        }
        None => Err(Failure::new(
            StatusCode::NOT_FOUND,
            40408,
            format!("Subject '{subject}' does not have subject-level compatibility configured"),
        )),
    }
}

const LEVELS: &[&str] =
    &["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"];

fn config_level(body: &Bytes) -> Result<String, Failure> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| Failure::new(StatusCode::UNPROCESSABLE_ENTITY, 422, e.to_string()))?;
    let level = value.get("compatibility").or_else(|| value.get("compatibilityLevel")).and_then(Value::as_str);
    match level.map(str::to_uppercase) {
        Some(level) if LEVELS.contains(&level.as_str()) => Ok(level),
        _ => Err(Failure::new(StatusCode::UNPROCESSABLE_ENTITY, 42203, "Invalid compatibility level")),
    }
}

async fn set_global_config(State(shared): Shared_, body: Bytes) -> Answer {
    let level = config_level(&body)?;
    store(&shared).global_level = Some(level.clone());
    Ok(reply(StatusCode::OK, json!({"compatibility": level})))
}

async fn set_subject_config(State(shared): Shared_, Path(subject): Path<String>, body: Bytes) -> Answer {
    let level = config_level(&body)?;
    store(&shared).levels.insert(subject, level.clone());
    Ok(reply(StatusCode::OK, json!({"compatibility": level})))
}

/// Binds `addr` without listening: connections to it are refused, and no
/// other socket (another registry starting on port 0, say) is given the port
/// while the registry is stopped, which would answer in its place.
fn hold(addr: SocketAddr) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let SocketAddr::V4(v4) = addr else { return None };
    let address = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
        sin_zero: [0; 8],
    };
    // Without SO_REUSEADDR first, so the port is held against every other
    // socket; with it when the stopped server's closed connections linger.
    for reuse in [false, true] {
        // SAFETY: a socket this function owns from here on (`OwnedFd` closes it),
        // given a valid address of the length passed.
        let bound = unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                return None;
            }
            let fd = OwnedFd::from_raw_fd(fd);
            let one: libc::c_int = 1;
            let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            if reuse {
                libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, (&raw const one).cast(), len);
            }
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            (libc::bind(fd.as_raw_fd(), (&raw const address).cast(), len) == 0).then_some(fd)
        };
        if bound.is_some() {
            return bound;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a stopped registry's port was free, and another registry
    /// starting on port 0 could be given it and answer for it (a test saw a
    /// batch committed "while the registry was down").
    #[test]
    fn a_stopped_registry_keeps_its_port_and_refuses_connections() {
        let mut registry = EmbeddedRegistry::start().unwrap();
        registry.stop();
        assert!(std::net::TcpListener::bind(registry.addr).is_err(), "nothing else can take the port");
        let refused = std::net::TcpStream::connect(registry.addr).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        registry.resume().unwrap();
        assert!(std::net::TcpStream::connect(registry.addr).is_ok(), "serving again on the same port");
    }
}
