//! Hosting safely: HTTPS between the CLI and `weir serve` (a CA made in the
//! test; the certificate rotated by SIGHUP), connection secrets sealed at
//! rest (the raw catalog grepped; the key rotated; every connection still
//! working), and brokers that take TLS (stunnel in front of Tansu, with a
//! client certificate) or refuse SASL credentials (Tansu with authentication).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir::embedded::registry::EmbeddedRegistry;
use weir::formats::registry::SchemaType;
use weir::formats::{DataFormat, Format, encode_json_values};

use common::serve::{ADMIN, Body, Server, broker, declaration};
use common::stream::{clicks, produce_bytes, produce_with};
use common::tansu::Tansu;
use common::tls::{Ca, Stunnel};
use common::{block_on, free_port};

const CLICKS_AVRO: &str = include_str!("../guest-examples/data/clicks.avsc");
const QUICK: &str = "\"kafka.messages_rollover\" = 10\n\"kafka.time_rollover_seconds\" = 1";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn poll(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn https_end_to_end_with_the_cli_and_a_certificate_rotated_by_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let first = Ca::new("weir test CA");
    let first_ca = first.write(&dir.path().join("first-ca.pem"));
    let cert = first.issue(dir.path(), "server");
    let (cert_file, key_file) = (cert.cert.to_str().unwrap(), cert.key.to_str().unwrap());
    let mut server = Server::start_with(&dir.path().join("data"), &["--tls-cert", cert_file, "--tls-key", key_file]);
    assert!(server.url.starts_with("https://127.0.0.1:"), "{}", server.url);

    // The CLI trusts the system's roots by default: not our CA.
    let refused = server.cli(ADMIN, &["tenant", "list"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("cannot be trusted") && stderr(&refused).contains("--ca-file"), "{refused:?}");

    server.ca_file = Some(first_ca.clone());
    let created = server.cli_ok(ADMIN, &["tenant", "create", "acme"]);
    assert!(created.contains("tenant acme created"), "{created}");
    assert!(server.cli_ok(ADMIN, &["tenant", "list"]).contains("acme"));

    // Plain HTTP on the HTTPS port gets no answer.
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5))).build().into();
    assert!(agent.get(server.url.replace("https://", "http://") + "/health").call().is_err());

    // A certificate from another CA in the same files, then SIGHUP: served from then on, no restart.
    let second = Ca::new("weir test CA, the next one");
    let second_ca = second.write(&dir.path().join("second-ca.pem"));
    second.issue(dir.path(), "server");
    server.signal("HUP");
    server.ca_file = Some(second_ca.clone());
    poll("the rotated certificate", || server.cli(ADMIN, &["tenant", "list"]).status.success());
    server.ca_file = Some(first_ca);
    let old = server.cli(ADMIN, &["tenant", "list"]);
    assert!(!old.status.success() && stderr(&old).contains("cannot be trusted"), "{old:?}");

    // A broken file at the next SIGHUP: the certificate served so far stays.
    std::fs::write(&cert.cert, "not a certificate").unwrap();
    server.signal("HUP");
    std::thread::sleep(Duration::from_millis(500));
    server.ca_file = Some(second_ca);
    assert!(server.cli_ok(ADMIN, &["tenant", "list"]).contains("acme"));
    server.stop();
}

/// Every file under `dir` but the key file, searched for each secret's bytes.
fn assert_no_secret_in(dir: &Path, secrets: &[&str]) {
    let mut searched = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("secret.key")) {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        for secret in secrets {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds the secret {secret:?} in clear",
                path.display()
            );
        }
        searched += 1;
    }
    assert!(searched > 3, "nothing searched under {}", dir.display());
}

#[test]
fn connection_secrets_are_sealed_at_rest_and_a_rotated_key_keeps_every_connection_working() {
    let broker = broker();
    let registry = EmbeddedRegistry::start_with_credentials("svc", "registry-secret-4d1f").unwrap();
    let id = registry.register("clicks-value", SchemaType::Avro, CLICKS_AVRO, vec![]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data);
    let key_file = data.join("secret.key");
    assert!(
        server.banner.iter().any(|l| l.contains("generated the key") && l.contains(&key_file.display().to_string())),
        "{:?}",
        server.banner
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);

    let token = server.tenant("acme", json!({}));
    let settings = ["--client-setting", "session.timeout.ms=6000", "--client-setting", "heartbeat.interval.ms=500"];
    let mut args = vec!["collection", "create", "events", "--bootstrap-servers", broker.bootstrap_servers()];
    let url = registry.url();
    args.extend(["--schema-registry-url", &url, "--schema-registry-username", "svc"]);
    args.extend(["--schema-registry-password", "registry-secret-4d1f"]);
    args.extend(settings);
    server.cli_ok(&token, &args);
    // Every other kind of secret a connection holds.
    let vault = json!({
        "bootstrap_servers": "127.0.0.1:9",
        "credentials": { "mechanism": "SCRAM-SHA-512", "username": "alice", "password": "sasl-secret-91c2" },
        "client_settings": {
            "security.protocol": "sasl_ssl",
            "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nMIIEvmarker55d1\n-----END PRIVATE KEY-----\n",
            "ssl.key.password": "key-pass-0b7e",
        },
    });
    let (status, answer) = server.http(
        "POST",
        "/v1/collections",
        Some(&token),
        Some(Body::Json(json!({ "name": "vault", "connection": vault }))),
    );
    assert_eq!(status, 201, "{answer}");

    std::fs::write(dir.path().join("clicks.avsc"), CLICKS_AVRO).unwrap();
    let decl = declaration(dir.path(), QUICK);
    let text =
        std::fs::read_to_string(&decl).unwrap().replace("\"json\"", "\"avro\"").replace("clicks.json", "clicks.avsc");
    std::fs::write(&decl, text).unwrap();
    let plugin = common::guest_path("read-clicks");
    // The cross-check reads the registry with the stored password.
    let out = server.cli_ok(
        &token,
        &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", plugin.to_str().unwrap()],
    );
    assert!(out.contains("schema cross-checked against the registry"), "{out}");
    let format = Format::parse(DataFormat::Avro, CLICKS_AVRO, None).unwrap();
    let produce = |from: usize| {
        let encoded = encode_json_values(&format, &clicks(from, 20), Some(id)).unwrap();
        block_on(produce_bytes(broker.bootstrap_servers(), "clicks", &encoded));
    };
    produce(0);
    server.wait_for_rows(&token, "events", "clicks", 20);

    let secrets = ["registry-secret-4d1f", "sasl-secret-91c2", "key-pass-0b7e", "MIIEvmarker55d1"];
    assert_no_secret_in(&data, &secrets);

    // The catalog copied off the machine without its key: nothing to read, and it says why.
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for name in ["catalog.db", "catalog.db-wal"] {
        if data.join(name).exists() {
            std::fs::copy(data.join(name), copy.join(name)).unwrap();
        }
    }
    let err = weir::catalog::Catalog::open(&copy).err().expect("opened without the key").to_string();
    let key_id = server.cli_json(ADMIN, &["admin", "secret-key"])["key_id"].as_str().unwrap().to_string();
    assert!(err.contains(&format!("sealed under secret key {key_id}")) && err.contains("--secret-key-file"), "{err}");

    // Rotation: a new key, both connections resealed under it, the old key file replaced.
    let old_key = std::fs::read(&key_file).unwrap();
    let rotated = server.cli_ok(ADMIN, &["admin", "rotate-secret-key"]);
    assert!(rotated.contains(&format!("replaces {key_id}; 2 connections resealed")), "{rotated}");
    assert_ne!(std::fs::read(&key_file).unwrap(), old_key);
    assert!(!data.join("secret.key.next").exists());
    let new_id = server.cli_json(ADMIN, &["admin", "secret-key"])["key_id"].as_str().unwrap().to_string();
    assert_ne!(new_id, key_id);
    let audit = std::fs::read_to_string(data.join("audit.log")).unwrap();
    let event: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "secret-key.rotate")
        .expect("audited");
    assert_eq!(event["key_id"], new_id.as_str(), "{event}");
    assert_no_secret_in(&data, &secrets);

    // After a restart on the new key, every connection still works: the worker reads the registry again.
    server.stop();
    let server = Server::start(&data);
    assert!(!server.banner.iter().any(|l| l.contains("generated")), "{:?}", server.banner);
    produce(20);
    server.wait_for_rows(&token, "events", "clicks", 40);
    let shown = server.cli_json(&token, &["collection", "show", "vault"]);
    assert_eq!(shown["connection"]["credentials"]["username"], "alice", "{shown}");
    assert_eq!(shown["connection"]["credentials"]["password"], "(secret)", "{shown}");
    assert_eq!(shown["connection"]["client_settings"]["ssl.key.pem"], "(secret)", "{shown}");
    server.stop();
}

/// A connection to `bootstrap` over TLS, trusting `ca_pem`, with a client certificate when given.
fn tls_connection(bootstrap: &str, ca_pem: &str, client: Option<(&str, &str)>) -> Value {
    let mut settings = json!({
        "security.protocol": "ssl",
        "ssl.ca.pem": ca_pem,
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "500",
    });
    if let Some((cert, key)) = client {
        settings["ssl.certificate.pem"] = cert.into();
        settings["ssl.key.pem"] = key.into();
    }
    json!({ "bootstrap_servers": bootstrap, "client_settings": settings })
}

fn create_collection(server: &Server, token: &str, name: &str, connection: Value) {
    let body = json!({ "name": name, "connection": connection });
    let (status, answer) = server.http("POST", "/v1/collections", Some(token), Some(Body::Json(body)));
    assert_eq!(status, 201, "{answer}");
}

fn check(server: &Server, token: &str, collection: &str) -> (u16, Value) {
    let path = format!("/v1/collections/{collection}/connection/check");
    server.http("POST", &path, Some(token), Some(Body::Json(json!({ "topic": "clicks" }))))
}

#[test]
fn a_broker_behind_tls_takes_our_ca_and_client_certificate_and_refuses_anything_else_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let brokers_ca = Ca::new("brokers' CA");
    let broker_cert = brokers_ca.issue(dir.path(), "broker");
    let clients_ca = Ca::new("clients' CA");
    let clients_ca_file = clients_ca.write(&dir.path().join("clients-ca.pem"));
    let client = clients_ca.issue(dir.path(), "client");
    let stranger = Ca::new("a CA nobody uses");

    // Tansu speaks plain Kafka and tells clients the broker is at stunnel's TLS port.
    let tls_port = free_port();
    let tansu = Tansu::start_with(free_port(), tls_port, &[]);
    tansu.create_topic("clicks", 3);
    let tls = Stunnel::start(dir.path(), tls_port, &tansu.address, &broker_cert, Some(&clients_ca_file));

    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({}));
    let pair = Some((client.cert_pem.as_str(), client.key_pem.as_str()));
    create_collection(&server, &token, "events", tls_connection(&tls.address, &brokers_ca.pem, pair));
    create_collection(&server, &token, "wrong_ca", tls_connection(&tls.address, &stranger.pem, pair));
    create_collection(&server, &token, "no_cert", tls_connection(&tls.address, &brokers_ca.pem, None));

    let (status, answer) = check(&server, &token, "events");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["partitions"].as_array().map(Vec::len), Some(3), "{answer}");

    let (status, answer) = check(&server, &token, "wrong_ca");
    assert_eq!(status, 422, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("the TLS handshake with the brokers at {} failed", tls.address))
            && error.contains("certificate verify failed")
            && error.contains("ssl.ca.pem"),
        "{error}"
    );

    let (status, answer) = check(&server, &token, "no_cert");
    assert_eq!(status, 422, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("the TLS handshake with the brokers") && error.contains("ssl.certificate.pem"), "{error}");

    // Through TLS end to end: registration, consumption, the table.
    let decl = declaration(dir.path(), QUICK);
    let plugin = common::guest_path("read-clicks");
    let out = server.cli_ok(
        &token,
        &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", plugin.to_str().unwrap()],
    );
    assert!(out.contains("connection check passed and the topic exists"), "{out}");
    let values: Vec<Vec<u8>> = clicks(0, 30).into_iter().map(String::into_bytes).collect();
    let settings = [
        ("bootstrap.servers", tls.address.as_str()),
        ("security.protocol", "ssl"),
        ("ssl.ca.pem", brokers_ca.pem.as_str()),
        ("ssl.certificate.pem", client.cert_pem.as_str()),
        ("ssl.key.pem", client.key_pem.as_str()),
    ];
    block_on(produce_with(&settings, "clicks", &values));
    server.wait_for_rows(&token, "events", "clicks", 30);
    server.stop();
}

#[test]
fn a_broker_that_refuses_the_credentials_is_a_clear_registration_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let tansu = Tansu::start_with(port, port, &["--authentication"]);
    let server = Server::start(&dir.path().join("data"));
    let token = server.tenant("acme", json!({}));
    for (name, mechanism) in [("scram256", "SCRAM-SHA-256"), ("scram512", "SCRAM-SHA-512"), ("plain", "PLAIN")] {
        let connection = json!({
            "bootstrap_servers": tansu.address,
            "credentials": { "mechanism": mechanism, "username": "alice", "password": "not-her-password" },
        });
        create_collection(&server, &token, name, connection);
    }
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let collection = format!("scram{}", &mechanism[10..]);
        let (status, answer) = check(&server, &token, &collection);
        assert_eq!(status, 422, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("the broker refused the credentials for user alice ({mechanism})"))
                && error.contains("SCRAM authentication failed"),
            "{error}"
        );
    }
    let (status, answer) = check(&server, &token, "plain");
    assert_eq!(status, 422, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("do not take SASL mechanism PLAIN"), "{error}");

    // Registration says the same.
    let decl = declaration(dir.path(), QUICK);
    let plugin = common::guest_path("read-clicks");
    let out = server.cli(
        &token,
        &["publisher", "register", "scram512", decl.to_str().unwrap(), "--plugin", plugin.to_str().unwrap()],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("the broker refused the credentials for user alice (SCRAM-SHA-512)"), "{out:?}");

    // A running publisher whose brokers start refusing it (its connection moved to the
    // authenticating broker): its status says so, and /metrics.
    let open = Tansu::start();
    open.create_topic("clicks", 1);
    let connection = json!({
        "bootstrap_servers": open.address,
        "client_settings": { "session.timeout.ms": "6000", "heartbeat.interval.ms": "500" },
    });
    create_collection(&server, &token, "events", connection);
    server.cli_ok(
        &token,
        &["publisher", "register", "events", decl.to_str().unwrap(), "--plugin", plugin.to_str().unwrap()],
    );
    let moved = json!({
        "bootstrap_servers": tansu.address,
        "credentials": { "mechanism": "SCRAM-SHA-256", "username": "alice", "password": "not-her-password" },
    });
    let (status, answer) =
        server.http("PUT", "/v1/collections/events/connection", Some(&token), Some(Body::Json(moved)));
    assert_eq!(status, 200, "{answer}");
    poll("the status to say the brokers refuse the worker", || {
        let status = server.cli_json(&token, &["publisher", "status", "events/read_clicks"]);
        status["broker_refused"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the broker refused the credentials for user alice (SCRAM-SHA-256)"))
    });
    let printed = server.cli_ok(&token, &["publisher", "status", "events/read_clicks"]);
    assert!(printed.contains("brokers        refuse this worker since"), "{printed}");
    let metrics = server.text("/metrics", ADMIN);
    assert!(metrics.lines().any(|l| l.starts_with("weir_broker_refused{") && l.ends_with(" 1")), "{metrics}");
    server.stop();
}

/// Runs a shell line in `dir`, as a user following the CLI's advice would.
fn sh(dir: &Path, line: &str) {
    let out = std::process::Command::new("sh").arg("-c").arg(line).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "{line}: {}", stderr(&out));
}

#[test]
fn a_self_signed_certificate_made_the_usual_way_is_explained_and_the_advice_works() {
    let dir = tempfile::tempdir().unwrap();
    // The usual self-signed certificate: a CA's, used as the server's own.
    sh(
        dir.path(),
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout self.key -out self.pem -days 30 -subj /CN=localhost \
         -addext subjectAltName=IP:127.0.0.1",
    );
    let file = |name: &str| dir.path().join(name).display().to_string();
    let (cert, key) = (file("self.pem"), file("self.key"));
    let mut server = Server::start_with(&dir.path().join("data"), &["--tls-cert", &cert, "--tls-key", &key]);
    server.ca_file = Some(dir.path().join("self.pem"));
    let refused = server.cli(ADMIN, &["tenant", "list"]);
    assert!(!refused.status.success());
    let said = stderr(&refused);
    assert!(said.contains("Its certificate is a CA's") && said.contains("openssl x509 -req"), "{said}");
    drop(server);

    // The commands it gives, as given: then the CLI trusts the server.
    let commands: Vec<&str> =
        said.lines().map(str::trim).filter(|l| l.starts_with("openssl") || l.starts_with("printf")).collect();
    assert_eq!(commands.len(), 4, "{said}");
    for line in commands {
        sh(dir.path(), line);
    }
    let (cert, key) = (file("server.pem"), file("server.key"));
    let mut server = Server::start_with(&dir.path().join("data2"), &["--tls-cert", &cert, "--tls-key", &key]);
    server.ca_file = Some(dir.path().join("ca.pem"));
    assert!(server.cli_ok(ADMIN, &["tenant", "create", "acme"]).contains("tenant acme created"));
}
