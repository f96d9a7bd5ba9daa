//! Tenants and their tokens on `weir serve`: every request needs a token, a
//! tenant sees only its own objects, and tokens are listed without
//! themselves, revoked or expired at once, and audited.

mod common;

use std::time::Duration;

use serde_json::{Value, json};

use common::block_on;
use common::serve::{ADMIN, Body, Server, broker, registered};
use common::stream::{clicks, produce};

#[test]
fn tokens_are_required_and_tenants_see_only_their_own() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let bootstrap = broker.bootstrap_servers();
    let acme = registered(&server, dir.path(), bootstrap);
    block_on(produce(bootstrap, "clicks", &clicks(0, 100)));
    server.wait_for_rows(&acme, "events", "clicks", 100);
    let execution = server.cli_json(&acme, &["execution", "list", "events/read_clicks"])[0]["id"].clone();

    // No token, a wrong token: 401. The wrong kind of token: 403.
    let (status, answer) = server.http("GET", "/v1/collections", None, None);
    assert_eq!(status, 401);
    assert!(answer["error"].as_str().unwrap().contains("no token"), "{answer}");
    assert_eq!(server.http("GET", "/v1/collections", Some("weir_wrong"), None).0, 401);
    assert_eq!(server.http("GET", "/v1/tenants", Some(&acme), None).0, 403);
    assert_eq!(server.http("GET", "/v1/collections", Some(ADMIN), None).0, 403);
    assert_eq!(server.http("GET", "/metrics", None, None).0, 401);
    let out = server.cli("weir_wrong", &["collection", "list"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the token is not valid"));

    // Another tenant: every one of acme's objects is a 404, and its own `events` is its own.
    let other = server.tenant("other", json!({}));
    let execution_path = format!("/v1/executions/{execution}");
    for path in [
        "/v1/collections/events",
        "/v1/collections/events/publishers",
        "/v1/collections/events/publishers/read_clicks",
        "/v1/collections/events/publishers/read_clicks/executions",
        "/v1/collections/events/tables",
        "/v1/collections/events/tables/clicks/versions",
        "/v1/collections/events/tables/clicks/sample",
        "/v1/collections/events/tables/clicks/export",
        execution_path.as_str(),
    ] {
        assert_eq!(server.http("GET", path, Some(&other), None).0, 404, "{path}");
        assert_eq!(server.http("GET", path, Some(&acme), None).0, 200, "{path}");
    }
    assert_eq!(server.http("DELETE", "/v1/collections/events/publishers/read_clicks", Some(&other), None).0, 404);
    assert_eq!(server.http("POST", "/v1/collections/events/publishers/read_clicks/pause", Some(&other), None).0, 404);
    assert_eq!(server.http("GET", "/v1/collections", Some(&other), None).1, json!([]));
    assert_eq!(server.http("GET", "/v1/plugins", Some(&other), None).1, json!([]));
    let body = json!({ "name": "events", "connection": { "bootstrap_servers": bootstrap } });
    assert_eq!(server.http("POST", "/v1/collections", Some(&other), Some(Body::Json(body))).0, 201);
    assert_eq!(server.http("GET", "/v1/collections/events/tables", Some(&other), None).1, json!([]));

    // Settings that would reach the server's files or run its commands are refused.
    for settings in
        [json!({ "plugin.library.paths": "/tmp/evil.so" }), json!({ "sasl.kerberos.kinit.cmd": "touch /tmp/pwned" })]
    {
        let body = json!({ "bootstrap_servers": bootstrap, "client_settings": settings });
        let (status, answer) =
            server.http("PUT", "/v1/collections/events/connection", Some(&other), Some(Body::Json(body)));
        assert_eq!(status, 422, "{answer}");
        assert!(answer["error"].as_str().unwrap().contains("is not accepted by a server"), "{answer}");
    }

    // Secrets are stored, never returned.
    let body = json!({ "bootstrap_servers": bootstrap, "credentials": { "mechanism": "PLAIN", "username": "u", "password": "hunter2" },
                       "client_settings": { "sasl.oauthbearer.client.secret": "s3cret" } });
    let (status, answer) =
        server.http("PUT", "/v1/collections/events/connection", Some(&other), Some(Body::Json(body)));
    assert_eq!(status, 200, "{answer}");
    let shown = server.http("GET", "/v1/collections/events", Some(&other), None).1.to_string();
    assert!(!shown.contains("hunter2") && !shown.contains("s3cret") && shown.contains("(secret)"), "{shown}");
    let out = server.cli_ok(&other, &["collection", "show", "events"]);
    assert!(out.contains("PLAIN as u (password stored)") && !out.contains("hunter2"), "{out}");
}

#[test]
fn tokens_are_listed_without_themselves_revoked_or_expired_at_once_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let first = server.tenant("acme", json!({}));
    assert_eq!(server.http("GET", "/v1/collections", Some(&first), None).0, 200);

    // A second token that expires in a second, and a third to revoke.
    let short = server.cli_json(ADMIN, &["tenant", "token", "acme", "--expires-in", "1s"]);
    let (short_token, short_id) = (short["token"].as_str().unwrap(), short["token_id"].as_str().unwrap());
    let third = server.cli_json(ADMIN, &["tenant", "token", "acme"]);
    let (third_token, third_id) = (third["token"].as_str().unwrap(), third["token_id"].as_str().unwrap());
    assert_eq!(server.http("GET", "/v1/collections", Some(short_token), None).0, 200);
    assert_eq!(server.http("GET", "/v1/collections", Some(third_token), None).0, 200);

    // Listed: id, created, last used, expiry, never a token.
    let listed = server.cli_json(ADMIN, &["tenant", "tokens", "acme"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
    let text = serde_json::to_string(listed).unwrap();
    for token in [first.as_str(), short_token, third_token] {
        assert!(!text.contains(token.trim_start_matches("weir_")), "a token is listed: {text}");
    }
    let short_row = listed.iter().find(|t| t["id"] == short_id).unwrap();
    assert!(short_row["expires_at_ms"].is_i64() && short_row["last_used_ms"].is_i64(), "{short_row}");
    assert!(server.cli_ok(ADMIN, &["tenant", "tokens", "acme"]).contains(third_id));

    // Revoked: 401 at once, saying so; the others still work.
    server.cli_ok(ADMIN, &["tenant", "revoke-token", "acme", third_id]);
    let (status, answer) = server.http("GET", "/v1/collections", Some(third_token), None);
    assert_eq!(status, 401);
    assert!(answer["error"].as_str().unwrap().contains(&format!("token {third_id} was revoked at")), "{answer}");
    assert_eq!(server.http("GET", "/v1/collections", Some(&first), None).0, 200);
    assert_eq!(server.http("DELETE", "/v1/tenants/acme/tokens/nosuch", Some(ADMIN), None).0, 404);

    // Expired: 401 once its second is up.
    std::thread::sleep(Duration::from_millis(1200));
    let (status, answer) = server.http("GET", "/v1/collections", Some(short_token), None);
    assert_eq!(status, 401);
    assert!(answer["error"].as_str().unwrap().contains(&format!("token {short_id} expired at")), "{answer}");

    // The audit log: one JSON line an event, admin actions and refusals alike.
    assert_eq!(server.http("GET", "/v1/collections", Some("weir_wrong"), None).0, 401);
    assert_eq!(server.http("GET", "/v1/tenants", Some(&first), None).0, 403);
    let log = std::fs::read_to_string(dir.path().join("data/audit.log")).unwrap();
    let events: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).expect("one JSON object a line")).collect();
    let names: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    for expected in ["tenant.create", "token.create", "token.revoke", "auth.refused"] {
        assert!(names.contains(&expected), "no {expected} in {names:?}");
    }
    let refused: Vec<&Value> = events.iter().filter(|e| e["event"] == "auth.refused").collect();
    assert!(refused.iter().any(|e| e["token_id"] == third_id && e["status"] == 401), "{refused:?}");
    assert!(refused.iter().any(|e| e["token_id"] == short_id), "{refused:?}");
    assert!(refused.iter().any(|e| e["status"] == 403 && e["path"] == "/v1/tenants"), "{refused:?}");
    assert!(!log.contains(third_token.trim_start_matches("weir_")), "the audit log holds no token");
}
