//! Dead letters a publisher keeps in the catalog (its source has no
//! dead-letter topic), through `weir serve` and the CLI: listed, filtered,
//! shown and exported with their original bytes; and, once their cause is
//! fixed, re-run through the current declaration and plugin into one new
//! table version, each letter at most once.

mod common;

use serde_json::{Value, json};

use common::block_on;
use common::serve::{QUICK, Server, broker, declaration, event_ids, plugin_path, poll, registered};
use common::stream::{clicks, produce};

#[test]
fn dead_letters_kept_in_the_catalog_are_listed_filtered_shown_and_exported_with_their_bytes() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = registered(&server, dir.path(), broker.bootstrap_servers());
    let truncated = r#"{"event_id": "bad-1", "user_id": "#.to_string();
    let mistyped = json!({"event_id": "bad-2", "user_id": "x", "url": "/", "ts": "2026-11-29T10:00:00Z"}).to_string();
    let mut values = clicks(0, 10);
    values.extend([truncated.clone(), mistyped.clone()]);
    block_on(produce(broker.bootstrap_servers(), "clicks", &values));
    server.wait_for_rows(&token, "events", "clicks", 10);
    let listed = poll("two dead letters", || {
        let list = server.cli_json(&token, &["dead-letters", "list", "events/read_clicks"]);
        (list.as_array().unwrap().len() == 2).then_some(list)
    });
    let texts: Vec<&str> = listed.as_array().unwrap().iter().map(|d| d["value_text"].as_str().unwrap()).collect();
    assert!(texts.contains(&truncated.as_str()) && texts.contains(&mistyped.as_str()), "{listed}");
    let bad = listed.as_array().unwrap().iter().find(|d| d["value_text"] == mistyped.as_str()).unwrap();
    assert!(bad["error"].as_str().unwrap().contains("user_id"), "the reason names the field: {bad}");

    // Filters: by reason, by execution (the batch that met it), by time.
    let by_reason = server.cli_json(&token, &["dead-letters", "list", "events/read_clicks", "--reason", "USER_ID"]);
    assert!(by_reason.as_array().unwrap().iter().any(|d| d["value_text"] == mistyped.as_str()), "{by_reason}");
    let execution = bad["execution"].to_string();
    let by_execution =
        server.cli_json(&token, &["dead-letters", "list", "events/read_clicks", "--execution", &execution]);
    assert!(by_execution.as_array().unwrap().iter().all(|d| d["execution"] == bad["execution"]));
    let later =
        server.cli_json(&token, &["dead-letters", "list", "events/read_clicks", "--since", "2999-01-01T00:00:00Z"]);
    assert_eq!(later, json!([]));
    // Server flags before the subcommand, as anywhere else.
    let recent =
        server.cli_ok(&token, &["--output", "json", "dead-letters", "list", "events/read_clicks", "--since", "1h"]);
    assert_eq!(serde_json::from_str::<Value>(&recent).unwrap().as_array().unwrap().len(), 2);

    // One in full; its execution points at it.
    let (partition, offset) = (bad["partition"].to_string(), bad["offset"].to_string());
    let shown = server.cli_ok(&token, &["dead-letters", "show", "events/read_clicks", &partition, &offset]);
    assert!(shown.contains(&mistyped) && shown.contains("user_id"), "{shown}");
    let execution_shown = server.cli_ok(&token, &["execution", "show", &execution]);
    assert!(execution_shown.contains("weir dead-letters list events/read_clicks --execution"), "{execution_shown}");
    let (status, _) =
        server.http("GET", "/v1/collections/events/publishers/read_clicks/dead-letters/0/999999", Some(&token), None);
    assert_eq!(status, 404);

    // Exported as JSON lines, the original bytes in base64.
    let out = dir.path().join("dead.jsonl");
    server.cli_ok(&token, &["dead-letters", "export", "events/read_clicks", "-o", out.to_str().unwrap()]);
    let lines: Vec<Value> =
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    use base64::prelude::{BASE64_STANDARD, Engine as _};
    let mut bytes: Vec<Vec<u8>> =
        lines.iter().map(|d| BASE64_STANDARD.decode(d["value_base64"].as_str().unwrap()).unwrap()).collect();
    bytes.sort();
    let mut expected = vec![truncated.into_bytes(), mistyped.into_bytes()];
    expected.sort();
    assert_eq!(bytes, expected, "the original bytes");
}

#[test]
fn dead_letters_re_run_once_their_cause_is_fixed_each_into_the_table_once() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = registered(&server, dir.path(), broker.bootstrap_servers());
    // Two clicks without a url (the schema requires one), and bytes no schema reads.
    let no_url = |id: &str| json!({"event_id": id, "user_id": 7, "ts": "2026-11-29T10:00:00Z"}).to_string();
    let mut values = clicks(0, 10);
    values.extend([no_url("late-1"), no_url("late-2"), "{\"event_id\": ".to_string()]);
    block_on(produce(broker.bootstrap_servers(), "clicks", &values));
    server.wait_for_rows(&token, "events", "clicks", 10);
    let kept = || server.cli_json(&token, &["dead-letters", "list", "events/read_clicks"]);
    poll("three dead letters", || (kept().as_array().unwrap().len() == 3).then_some(()));

    // Before the fix, nothing decodes: nothing is committed, all stay.
    let out = server.cli_ok(&token, &["dead-letters", "rerun", "events/read_clicks"]);
    assert!(out.contains("none of the 3 chosen dead letters decodes yet; nothing was committed"), "{out}");
    assert!(out.contains("3 still do not decode, and stay kept") && out.contains("url"), "{out}");
    assert_eq!(kept().as_array().unwrap().len(), 3);

    // The fix: a url is no longer required.
    let decl = declaration(dir.path(), QUICK);
    let schema = dir.path().join("clicks.json");
    let fixed = std::fs::read_to_string(&schema)
        .unwrap()
        .replace(r#""required": ["event_id", "user_id", "url", "ts"]"#, r#""required": ["event_id", "user_id", "ts"]"#);
    std::fs::write(&schema, fixed).unwrap();
    let update = ["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", &plugin_path(), "--update"];
    server.cli_ok(&token, &update);

    // One chosen by partition and offset first.
    let letters = kept();
    let first =
        letters.as_array().unwrap().iter().find(|d| d["value_text"].as_str().unwrap().contains("late-1")).unwrap();
    let (partition, offset) = (first["partition"].to_string(), first["offset"].to_string());
    let one = ["dead-letters", "rerun", "events/read_clicks", "--partition", &partition, "--offset", &offset];
    let report = server.cli_json(&token, &one);
    assert_eq!(
        (report["chosen"].clone(), report["rerun"].clone(), report["rows_out"].clone()),
        (json!(1), json!(1), json!(1)),
        "{report}"
    );
    let version = report["version"].as_i64().expect("a new version");
    server.wait_for_rows(&token, "events", "clicks", 11);
    // Again: it is no longer kept.
    let again = server.cli(&token, &one);
    assert!(String::from_utf8_lossy(&again.stderr).contains("keeps no dead letters that match"), "{again:?}");

    // The rest by two re-runs at once: late-2 reaches the table once, the bytes stay.
    let both = std::thread::scope(|s| {
        let run =
            || s.spawn(|| server.cli(&token, &["--output", "json", "dead-letters", "rerun", "events/read_clicks"]));
        let (a, b) = (run(), run());
        [a.join().unwrap(), b.join().unwrap()]
    });
    let reports: Vec<Value> =
        both.iter().filter(|o| o.status.success()).map(|o| serde_json::from_slice(&o.stdout).unwrap()).collect();
    let rerun: u64 = reports.iter().map(|r| r["rerun"].as_u64().unwrap()).sum();
    assert_eq!(rerun, 1, "late-2 re-run once: {reports:?} {both:?}");
    for failed in both.iter().filter(|o| !o.status.success()) {
        let said = String::from_utf8_lossy(&failed.stderr);
        assert!(
            said.contains("another re-run committed it") || said.contains("keeps no dead letters that match"),
            "{said}"
        );
    }
    let remaining = kept();
    assert_eq!(remaining.as_array().unwrap().len(), 1, "{remaining}");
    assert!(remaining[0]["error"].as_str().is_some());

    // The table holds every click once; the re-run's execution says what it was.
    server.wait_for_rows(&token, "events", "clicks", 12);
    let export = dir.path().join("all.parquet");
    server.cli_ok(&token, &["table", "export", "events/clicks", "-o", export.to_str().unwrap()]);
    let ids = event_ids(&export);
    assert_eq!(ids.len(), 12);
    assert_eq!(ids.iter().filter(|i| i.starts_with("late-")).count(), 2, "{ids:?}");
    let execution = server.cli_json(&token, &["execution", "show", &report["execution"].to_string()]);
    assert_eq!(
        (execution["rollover_reason"].clone(), execution["table_version"].clone()),
        (json!("rerun"), json!(version)),
        "{execution}"
    );
}
