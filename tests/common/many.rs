//! Many publishers on one server: publisher `p<i>` reads topic `t<i>` into
//! table `t<i>`, registered through the HTTP API with a plugin uploaded once
//! per tenant; and what `/metrics` says about each of them.

use serde_json::{Value, json};

use super::serve::{Body, Server};

/// Publisher `p<i>`'s declaration: topic and table `t<i>`, clicks as JSON, a 1 s time rollover.
pub fn declaration(i: usize) -> String {
    format!(
        "name = \"p{i}\"\nflush_interval_mins = 1\noutput_tables = [\"t{i}\"]\n[source.kafka]\ntopic = \"t{i}\"\ndata_format = \"json\"\nschema = {}\n[source.kafka.src_cfg]\n\"kafka.time_rollover_seconds\" = 1\n",
        serde_json::to_string(super::stream::CLICKS_SCHEMA).unwrap()
    )
}

/// A connection to `bootstrap` with a short group session (a killed node's
/// partitions move on in seconds).
pub fn connection(bootstrap: &str) -> Value {
    json!({
        "bootstrap_servers": bootstrap,
        "client_settings": {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"},
    })
}

/// Creates `collection` on `connection` for `token`'s tenant.
pub fn collection(server: &Server, token: &str, collection: &str, connection: &Value) {
    let body = json!({"name": collection, "connection": connection});
    let (status, answer) = server.http("POST", "/v1/collections", Some(token), Some(Body::Json(body)));
    assert_eq!(status, 201, "{answer}");
}

/// Uploads a plugin for `token`'s tenant; returns its digest.
pub fn plugin(server: &Server, token: &str, wasm: &[u8]) -> String {
    let (status, answer) = server.http("POST", "/v1/plugins", Some(token), Some(Body::Bytes(wasm.to_vec())));
    assert!(status < 300, "{answer}");
    answer["sha256"].as_str().unwrap().to_string()
}

/// Registers publisher `p<i>` into `collection`, running the plugin `sha`.
pub fn register(server: &Server, token: &str, collection: &str, i: usize, sha: &str) {
    let body = json!({"declaration": declaration(i), "plugin": sha});
    let path = format!("/v1/collections/{collection}/publishers");
    let (status, answer) = server.http("POST", &path, Some(token), Some(Body::Json(body)));
    assert_eq!(status, 201, "publisher {i}: {answer}");
}

/// The values of metric `name` in `/metrics` text, for series whose
/// labels include every one of `labels`, with their other labels.
pub fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> Vec<(String, f64)> {
    let mut found = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else { continue };
        let Some((set, value)) = rest.rsplit_once("} ") else { continue };
        if labels.iter().all(|(k, v)| set.contains(&format!("{k}=\"{v}\""))) {
            found.push((set.to_string(), value.parse().expect("a number")));
        }
    }
    found
}
