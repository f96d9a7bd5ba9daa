//! The web console `weir serve` serves at `/`: signed in with a token
//! exchanged for a session cookie, walked in a real browser (Debian's
//! Chromium, driven by Selenium from `tests/peers/console.py`) as a tenant,
//! another tenant and the admin; and its sessions' rules over plain HTTP
//! (cookie attributes, CSRF, sign-out, idle expiry, a revoked token).

mod common;

use serde_json::{Value, json};

use common::block_on;
use common::serve::{ADMIN, QUICK, Server, broker, declaration, poll, registered};
use common::stream::{clicks, produce_bytes};

/// Signs in over HTTP; the session cookie's `Set-Cookie` line and the answer.
fn sign_in(server: &Server, token: &str) -> (u16, Option<String>, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response =
        agent.post(format!("{}/console/session", server.url)).send_json(json!({ "token": token })).unwrap();
    let cookie = response.headers().get("set-cookie").map(|v| v.to_str().unwrap().to_string());
    let status = response.status().as_u16();
    let body: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap_or(Value::Null);
    (status, cookie, body)
}

/// A request with a session cookie (and a CSRF token, if given): its status.
fn with_session(server: &Server, method: &str, path: &str, cookie: &str, csrf: Option<&str>) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let id = cookie.split(';').next().unwrap();
    let url = format!("{}{path}", server.url);
    let response = match method {
        "GET" => agent.get(&url).header("Cookie", id).call(),
        _ => {
            let mut request = agent.post(&url).header("Cookie", id);
            if let Some(csrf) = csrf {
                request = request.header("X-CSRF-Token", csrf);
            }
            request.send_json(json!({ "name": "from-a-session" }))
        }
    };
    response.unwrap().status().as_u16()
}

#[test]
fn a_tenant_walks_the_console_in_a_browser_and_sees_only_its_own() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = registered(&server, dir.path(), broker.bootstrap_servers());
    let other = server.tenant("globex", json!({}));
    // Ten clicks, and three dead letters: markup that must stay text, bytes
    // that are not UTF-8, and a click whose user_id is not a number.
    let hostile = r#"<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>"#;
    let mistyped = json!({"event_id": "bad", "user_id": "x", "url": "/", "ts": "2026-11-29T10:00:00Z"}).to_string();
    let mut values: Vec<Vec<u8>> = clicks(0, 10).into_iter().map(String::into_bytes).collect();
    values.extend([hostile.as_bytes().to_vec(), vec![0xff, 0xfe, 0x00, 0x7b], mistyped.into_bytes()]);
    block_on(produce_bytes(broker.bootstrap_servers(), "clicks", &values));
    server.wait_for_rows(&token, "events", "clicks", 10);
    // A second publisher, on the same topic in another collection, whose plugin traps: retried.
    let bootstrap = broker.bootstrap_servers();
    server.cli_ok(&token, &["collection", "create", "faulty", "--bootstrap-servers", bootstrap]);
    let decl = declaration(dir.path(), QUICK);
    let panics = common::guest_path("hostile-panic").display().to_string();
    server.cli_ok(&token, &["publisher", "register", "faulty", decl.to_str().unwrap(), "--plugin", &panics]);
    poll("three dead letters", || {
        let (_, list) =
            server.http("GET", "/v1/collections/events/publishers/read_clicks/dead-letters", Some(&token), None);
        (list.as_array().map_or(0, Vec::len) == 3).then_some(())
    });

    let seen = common::peers::console_py(&[&server.url, bootstrap, &token, &other, ADMIN]);
    let text = |key: &str| seen[key].to_string();

    assert_eq!(seen["token_field_type"], "password", "{seen}");
    assert_eq!(seen["token_label"], "Token");
    assert!(text("refused").contains("not valid"), "{seen}");
    assert_eq!(seen["who"], "tenant acme");
    assert_eq!(seen["cookie_visible_to_script"], "", "the session cookie is HttpOnly");
    assert_eq!(seen["token_in_page"], false);
    assert_eq!(seen["storage"], 0);
    assert!(text("publishers").contains("events/read_clicks") && text("publishers").contains("consuming"), "{seen}");
    // The trapping plugin's publisher: retrying, in the sandbox's words (as its status gives them).
    let (_, faulty) =
        server.http("GET", "/v1/collections/faulty/publishers/read_clicks/executions", Some(&token), None);
    let words = faulty[0]["error"].as_str().unwrap_or_else(|| panic!("no failed attempt: {faulty}"));
    let row =
        seen["publishers"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).find(|r| r.starts_with("faulty/"));
    let row = row.unwrap_or_else(|| panic!("no faulty publisher listed: {seen}"));
    assert!(row.contains("retrying: attempt") && row.contains(words.lines().next().unwrap()), "{row}\n{words}");
    assert_eq!(seen["overflow_at_1280"], false);
    assert_eq!(seen["link_reached_by_keyboard"], true, "{seen}");
    let publisher = text("publisher_page");
    assert!(publisher.contains("consuming (partitions") && publisher.contains("events/clicks"), "{publisher}");
    assert!(publisher.contains("committed"), "{publisher}");
    // What it runs and reads from: the plugin's language and world, the connection (no secret in it here).
    assert!(publisher.contains(r"language\nRust") && publisher.contains(r"world\nweir:publisher@"), "{publisher}");
    assert!(publisher.contains("kafka-topic-in") && publisher.contains(bootstrap), "{publisher}");
    assert!(seen["activity_charts"].as_u64().unwrap() >= 2, "each publisher's last minutes charted: {seen}");
    assert!(seen["chart_bars"].as_u64().unwrap() >= 1, "{seen}");
    assert!(text("declaration").contains(r#"topic = \"clicks\""#), "{seen}");
    assert!(seen["batches_live"].as_u64().unwrap() >= 2, "{seen}");

    // The markup is shown as the text it is, and ran nowhere; the bytes as hex.
    let letters: Vec<&str> = seen["dead_letters"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(letters.contains(&hostile), "{letters:?}");
    assert!(letters.contains(&"ff fe 00 7b"), "{letters:?}");
    assert_eq!(seen["injected"], json!([null, 0]), "the dead letter's markup ran or made elements");
    assert_eq!(seen["dead_letter_reasons"].as_array().unwrap().len(), 3);
    assert!(text("dead_letter_reasons").contains("user_id"), "{seen}");
    assert_eq!(seen["filtered"], 1, "filtered by the reason `user_id`: {seen}");
    assert_eq!(seen["overflow_at_phone"], false, "the page is wider than a phone: {seen}");

    assert_eq!(seen["tables"], json!(["events/clicks"]));
    let table = text("table_page");
    assert!(table.contains("Delta Lake") && table.contains("delta_scan(") && table.contains("event_id"), "{table}");
    // Two versions by now: the first ten clicks, and the ten produced while the publisher's page was open.
    assert!(table.contains("rows 1 to 20 of 20") && table.contains("evt-1009"), "the preview shows rows: {table}");
    assert!(table.contains("version 2: 2 files") && table.contains(".parquet"), "the files are listed: {table}");
    let paged = text("next_page");
    assert_eq!(paged.matches("evt-").count(), 5, "the second page of five rows: {paged}");

    assert_eq!(seen["post_without_csrf"], 403, "{seen}");
    assert_eq!(seen["post_with_csrf"], 201, "{seen}");
    assert!(text("confirm_paused").contains("Pause events/read_clicks?"), "{seen}");
    assert!(text("confirm_consuming").contains("Resume events/read_clicks?"), "{seen}");
    assert_eq!(seen["paused_and_resumed"], true);
    let (_, status) = server.http("GET", "/v1/collections/events/publishers/read_clicks", Some(&token), None);
    assert_eq!(status["worker"]["state"], "consuming", "the console's resume reached the server");
    assert_eq!(seen["after_sign_out"], 401);
    assert!(text("other_tenant").contains("No publishers yet"), "{seen}");
    // Another tenant's publisher by its URL: not found (not forbidden: its existence is not told).
    assert_eq!(seen["other_by_url_status"], 404, "{seen}");
    assert!(text("other_by_url").contains("does not exist"), "{seen}");
    // axe-core's check in every page: no serious or critical violation.
    let checked = seen["accessibility"].as_object().unwrap();
    assert_eq!(checked.len(), 7, "{seen}");
    for (page, violations) in checked {
        assert_eq!(violations, &json!([]), "accessibility of the {page} page");
    }
    let tenants = text("tenants");
    assert!(tenants.contains("acme, created") && tenants.contains("globex, created"), "{seen}");
    assert!(text("audit").contains("console.sign-in") && text("audit").contains("tenant.create"), "{seen}");
    // The token the admin made in the console, then revoked there: refused.
    let made = seen["made_token"].as_str().unwrap();
    assert!(made.starts_with("weir_"), "{seen}");
    let (status, answer) = server.http("GET", "/v1/publishers", Some(made), None);
    assert_eq!(status, 401, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("was revoked"), "{answer}");

    // The same console in Firefox, where browsers differ: cookies, the live
    // lists, markup in a message, paging, CSRF, signing out, another tenant.
    let firefox = common::peers::console_firefox(&[&server.url, &token, &other]);
    let seen = |key: &str| firefox[key].to_string();
    assert!(seen("browser").contains("firefox"), "{firefox}");
    assert_eq!(firefox["who"], "tenant acme", "{firefox}");
    assert_eq!((&firefox["cookie_visible_to_script"], &firefox["token_in_page"]), (&json!(""), &json!(false)));
    assert!(
        seen("publishers").contains("consuming") && seen("publishers").contains("the plugin panicked"),
        "{firefox}"
    );
    assert!(firefox["activity_charts"].as_u64().unwrap() >= 2, "{firefox}");
    assert!(seen("publisher_page").contains(r"language\nRust") && seen("publisher_page").contains("committed"));
    let letters: Vec<&str> = firefox["dead_letters"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(letters.contains(&hostile) && letters.contains(&"ff fe 00 7b"), "{letters:?}");
    assert_eq!(firefox["injected"], json!([null, 0]), "the dead letter's markup ran in Firefox");
    assert_eq!(seen("next_page").matches("evt-").count(), 5, "{firefox}");
    assert_eq!((&firefox["post_without_csrf"], &firefox["post_with_csrf"]), (&json!(403), &json!(201)));
    assert_eq!(firefox["after_sign_out"], 401, "{firefox}");
    assert_eq!(firefox["other_by_url_status"], 404, "{firefox}");
    assert!(seen("other_by_url").contains("does not exist"), "{firefox}");
    let checked = firefox["accessibility"].as_object().unwrap();
    assert_eq!(checked.len(), 4, "{firefox}");
    for (page, violations) in checked {
        assert_eq!(violations, &json!([]), "accessibility of the {page} page in Firefox");
    }
}

#[test]
fn a_session_is_an_httponly_cookie_whose_changes_need_csrf_and_which_ends_on_sign_out_idle_or_revocation() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(&dir.path().join("data"), &["--console-idle", "2s"]);
    let token = server.tenant("acme", json!({}));

    let (status, _, answer) = sign_in(&server, "weir_0000000000000000000000000000000000000000");
    assert_eq!(status, 401, "{answer}");
    let (status, cookie, answer) = sign_in(&server, &token);
    assert_eq!(status, 200, "{answer}");
    let cookie = cookie.expect("a session cookie");
    assert!(cookie.starts_with("weir_session=") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(!cookie.contains("Secure"), "plain HTTP on loopback: {cookie}");
    assert!(!cookie.contains(&token) && !answer.to_string().contains(&token), "the token is not handed back");
    assert_eq!(answer["tenant"], "acme");
    let csrf = answer["csrf"].as_str().unwrap().to_string();

    // Reads with the cookie alone; a change needs the CSRF token too.
    assert_eq!(with_session(&server, "GET", "/v1/collections", &cookie, None), 200);
    assert_eq!(with_session(&server, "POST", "/v1/collections", &cookie, None), 403);
    assert_eq!(with_session(&server, "POST", "/v1/collections", &cookie, Some("not-it")), 403);
    assert_eq!(with_session(&server, "POST", "/v1/collections", &cookie, Some(&csrf)), 201);
    // What a tenant's token may not do, its session may not either.
    assert_eq!(with_session(&server, "GET", "/v1/tenants", &cookie, None), 403);

    // Idle longer than --console-idle: ended.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(with_session(&server, "GET", "/v1/collections", &cookie, None), 401);

    // A revoked token ends the sessions opened with it.
    let (_, cookie, answer) = sign_in(&server, &token);
    let cookie = cookie.unwrap();
    assert_eq!(with_session(&server, "GET", "/console/session", &cookie, None), 200, "{answer}");
    let (_, tokens) = server.http("GET", "/v1/tenants/acme/tokens", Some(ADMIN), None);
    let id = tokens[0]["id"].as_str().unwrap().to_string();
    let (status, _) = server.http("DELETE", &format!("/v1/tenants/acme/tokens/{id}"), Some(ADMIN), None);
    assert_eq!(status, 200);
    assert_eq!(with_session(&server, "GET", "/v1/collections", &cookie, None), 401);
    assert_eq!(with_session(&server, "GET", "/console/session", &cookie, None), 401);

    // The page: embedded, its own script only.
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let page = agent.get(format!("{}/", server.url)).call().unwrap();
    let policy = page.headers().get("content-security-policy").unwrap().to_str().unwrap().to_string();
    assert!(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"), "{policy}");
}
