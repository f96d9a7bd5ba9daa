//! Plugins on a server as a tenant keeps them: pushed under names, listed with
//! what each is, registered by digest or name, and one generic component
//! serving publishers of two topics, each writing its own table.

mod common;

use serde_json::json;

use common::block_on;
use common::serve::{QUICK, Server, broker, declaration, guest_file, registered};
use common::stream::{clicks, produce};

#[test]
fn plugins_pushed_by_name_are_listed_with_what_they_are_and_registered_by_name() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = registered(&server, dir.path(), broker.bootstrap_servers());

    let pushed = server.cli_ok(&token, &["plugin", "push", &guest_file("passthrough"), "--name", "standard"]);
    assert!(pushed.contains("uploaded as `standard` (Rust, weir:publisher@0.2.1,"), "{pushed}");
    let python = common::python_guest_path("passthrough");
    let pushed = server.cli_json(&token, &["plugin", "push", python.to_str().unwrap(), "--name", "py-pass"]);
    assert_eq!((pushed["language"].clone(), pushed["new"].clone()), (json!("Python"), json!(true)), "{pushed}");
    let js = common::js_guest_path("passthrough");
    let pushed = server.cli_json(&token, &["plugin", "push", js.to_str().unwrap()]);
    assert_eq!(pushed["language"], "JavaScript", "{pushed}");
    let refused = server.cli(&token, &["plugin", "push", &guest_file("passthrough"), "--name", "Bad Name"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot name a plugin"), "{refused:?}");

    // The list: the seed's module (pushed by registration), then these three.
    let listed = server.cli_json(&token, &["plugin", "list"]);
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{listed}");
    let standard = rows.iter().find(|p| p["names"] == json!(["standard"])).expect("the named module");
    assert_eq!((standard["language"].clone(), standard["contract"].clone()), (json!("Rust"), json!("0.2.1")));
    assert!(standard["size"].as_u64().unwrap() > 10_000 && standard["created_at_ms"].as_i64().unwrap() > 0);
    let table = server.cli_ok(&token, &["plugin", "list"]);
    for word in ["NAME", "LANGUAGE", "WORLD", "SIZE", "PUSHED", "standard", "py-pass", "Python", "JavaScript", "MiB"] {
        assert!(table.contains(word), "{word} in\n{table}");
    }

    // A name moves to the build last pushed with it.
    server.cli_ok(&token, &["plugin", "push", &guest_file("read-clicks"), "--name", "standard"]);
    let listed = server.cli_json(&token, &["plugin", "list"]);
    let named: Vec<_> = listed.as_array().unwrap().iter().filter(|p| p["names"] == json!(["standard"])).collect();
    assert_eq!(named.len(), 1, "{listed}");
    assert_eq!(named[0]["sha256"], common::digest_of(&guest_file("read-clicks")));

    // Registered by name; an unknown name or a missing file says what to do.
    server.cli_ok(&token, &["collection", "create", "replay", "--bootstrap-servers", broker.bootstrap_servers()]);
    let decl = declaration(dir.path(), QUICK);
    let out =
        server.cli_ok(&token, &["publisher", "register", "replay", decl.to_str().unwrap(), "--plugin", "standard"]);
    assert!(out.contains("publisher replay/read_clicks registered"), "{out}");
    let status = server.cli_json(&token, &["publisher", "status", "replay/read_clicks"]);
    assert_eq!(status["plugin"], named[0]["sha256"], "{status}");
    let unknown = server
        .cli(&token, &["publisher", "register", "replay", decl.to_str().unwrap(), "--plugin", "nope", "--update"]);
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        said.contains(
            "no plugin is named `nope`: push one under that name with `weir plugin push FILE.wasm --name nope`"
        ),
        "{said}"
    );
    let missing =
        server.cli(&token, &["publisher", "register", "replay", decl.to_str().unwrap(), "--plugin", "gone.wasm"]);
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("plugin file gone.wasm does not exist"), "{said}");
}

#[test]
fn one_generic_component_serves_two_topics_each_into_its_own_table() {
    let broker = broker();
    broker.create_topic("orders", 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({}));
    server.cli_ok(&token, &["collection", "create", "events", "--bootstrap-servers", broker.bootstrap_servers()]);
    server.cli_ok(&token, &["plugin", "push", &guest_file("passthrough"), "--name", "standard"]);
    // The same declaration but for the topic (the schema fits both).
    let clicks_decl = declaration(dir.path(), QUICK);
    let text = std::fs::read_to_string(&clicks_decl).unwrap();
    let orders_decl = dir.path().join("orders.toml");
    let orders = text
        .replace("name = \"read_clicks\"", "name = \"read_orders\"")
        .replace("topic = \"clicks\"", "topic = \"orders\"")
        .replace("output_tables = [\"clicks\"]", "output_tables = [\"orders\"]");
    std::fs::write(&orders_decl, orders).unwrap();
    for decl in [&clicks_decl, &orders_decl] {
        server.cli_ok(&token, &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", "standard"]);
    }
    block_on(produce(broker.bootstrap_servers(), "clicks", &clicks(0, 30)));
    block_on(produce(broker.bootstrap_servers(), "orders", &clicks(100, 12)));
    server.wait_for_rows(&token, "events", "clicks", 30);
    server.wait_for_rows(&token, "events", "orders", 12);
    // Each execution's log says which topic went into which table.
    let executions = server.cli_json(&token, &["execution", "list", "events/read_orders"]);
    let id = executions.as_array().unwrap()[0]["id"].to_string();
    let shown = server.cli_ok(&token, &["execution", "show", &id]);
    assert!(shown.contains("rows from orders into orders"), "{shown}");
}
